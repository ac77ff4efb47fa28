// Decodes one TOON document with the official decoder in strict mode and prints it as JSON.
//
// Use: node tests/toon/decode.mjs < document.toon
//   exit 0: stdout holds the decoded value as JSON (one line);
//   exit 1: the document is not valid TOON, or its bytes are not valid UTF-8 (a TOON document
//           is UTF-8 text: a malformed sequence fails here instead of being replaced with
//           U+FFFD); stderr names why.
// Set-up, once per checkout: (cd tests/toon && npm ci) installs the decoder pinned by
// package-lock.json (@toon-format/toon 4.4.0). Test suites locate this script through
// JETTPROF_SOURCE_ROOT (set by tests/meson.build) and fail with a clear message when
// tests/toon/node_modules is missing.
import { decode } from '@toon-format/toon';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
let text;
try {
  text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(Buffer.concat(chunks));
} catch (err) {
  process.stderr.write('invalid UTF-8: the document is not UTF-8 text\n');
  process.exit(1);
}
try {
  const value = decode(text, { strict: true });
  process.stdout.write(JSON.stringify(value) + '\n');
} catch (err) {
  process.stderr.write('invalid TOON: ' + (err && err.message ? err.message : String(err)) + '\n');
  process.exit(1);
}
