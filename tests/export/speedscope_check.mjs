// Validates one speedscope document against the file-format schema the speedscope package
// ships (node_modules/speedscope/dist/release/file-format-schema.json), with ajv.
//
// Use: node tests/export/speedscope_check.mjs < export.speedscope.json
//   exit 0: valid; stdout holds the sum of the first profile's weights and its endValue;
//   exit 1: not JSON or not valid against the schema; stderr names why.
// Set-up, once per checkout: (cd tests/export && npm ci), as scripts/deps.sh does.
import Ajv from 'ajv';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const schema = JSON.parse(readFileSync(require.resolve(
  'speedscope/dist/release/file-format-schema.json'), 'utf8'));
const chunks = [];
for await (const c of process.stdin) chunks.push(c);
let doc;
try {
  doc = JSON.parse(Buffer.concat(chunks).toString('utf8'));
} catch (err) {
  process.stderr.write('not JSON: ' + err.message + '\n');
  process.exit(1);
}
const ajv = new Ajv({ strict: false, allErrors: true });
const validate = ajv.compile(schema);
if (!validate(doc)) {
  process.stderr.write('not a speedscope file: ' + ajv.errorsText(validate.errors) + '\n');
  process.exit(1);
}
const p = doc.profiles[0];
const sum = p.weights.reduce((a, b) => a + b, 0);
process.stdout.write(sum + ' ' + p.endValue + '\n');
