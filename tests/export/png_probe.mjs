// Reads a PNG (8-bit RGB or RGBA, not interlaced, as rsvg-convert writes) and prints its
// width and height, then the RGB of each pixel asked for.
//
// Use: node tests/export/png_probe.mjs FILE.png [X,Y ...]
//   stdout: "W H" on the first line, then "R G B" per X,Y; exit 1 when the file is no such PNG.
import { readFileSync } from 'node:fs';
import { inflateSync } from 'node:zlib';

const buf = readFileSync(process.argv[2]);
const fail = (why) => { process.stderr.write(why + '\n'); process.exit(1); };
if (buf.readUInt32BE(0) !== 0x89504e47) fail('not a PNG');
let off = 8, w = 0, h = 0, ctype = 0;
const idat = [];
while (off < buf.length) {
  const len = buf.readUInt32BE(off), type = buf.toString('latin1', off + 4, off + 8);
  const data = buf.subarray(off + 8, off + 8 + len);
  if (type === 'IHDR') {
    w = data.readUInt32BE(0); h = data.readUInt32BE(4);
    if (data[8] !== 8 || data[12] !== 0) fail('not 8-bit non-interlaced');
    ctype = data[9];
  } else if (type === 'IDAT') idat.push(data);
  off += 12 + len;
}
const bpp = ctype === 6 ? 4 : ctype === 2 ? 3 : fail('not RGB or RGBA');
const raw = inflateSync(Buffer.concat(idat)), stride = w * bpp;
const px = Buffer.alloc(h * stride);
for (let y = 0; y < h; y++) {
  const f = raw[y * (stride + 1)], src = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
  for (let x = 0; x < stride; x++) {
    const a = x >= bpp ? px[y * stride + x - bpp] : 0, b = y ? px[(y - 1) * stride + x] : 0;
    const c = x >= bpp && y ? px[(y - 1) * stride + x - bpp] : 0;
    let v = src[x];
    if (f === 1) v += a; else if (f === 2) v += b; else if (f === 3) v += (a + b) >> 1;
    else if (f === 4) { const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b),
                        pc = Math.abs(p - c); v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c; }
    px[y * stride + x] = v & 255;
  }
}
const out = [w + ' ' + h];
for (const arg of process.argv.slice(3)) {
  const [x, y] = arg.split(',').map(Number), i = y * stride + x * bpp;
  out.push(px[i] + ' ' + px[i + 1] + ' ' + px[i + 2]);
}
process.stdout.write(out.join('\n') + '\n');
