// Decodes one TOON document with the official decoder in strict mode and prints it as JSON.
//
// Use: node tests/toon/decode.mjs < document.toon
//   exit 0: stdout holds the decoded value as JSON (one line);
//   exit 1: the document is not valid TOON; stderr names why.
// Set-up, once per checkout: (cd tests/toon && npm ci) installs the decoder pinned by
// package-lock.json (@toon-format/toon 4.4.0). Test suites locate this script through
// JETTPROF_SOURCE_ROOT (set by tests/meson.build) and fail with a clear message when
// tests/toon/node_modules is missing.
import { decode } from '@toon-format/toon';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const text = Buffer.concat(chunks).toString('utf8');
try {
  const value = decode(text, { strict: true });
  process.stdout.write(JSON.stringify(value) + '\n');
} catch (err) {
  process.stderr.write('invalid TOON: ' + (err && err.message ? err.message : String(err)) + '\n');
  process.exit(1);
}
