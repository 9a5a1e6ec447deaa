// Runs web/hub.js under Node on the shared reference cases and on live resolutions; prints the answers as JSON.
// Usage: node hub_cases.mjs CASES.json ENDPOINT MODEL...   (tests/unit/test_web_hub.py compares them)
import { readFileSync } from "node:fs";
import { chooseHubFiles, hubFileURL, parseHubRef, resolveModelURL } from "../../web/hub.js";

const [casesPath, endpoint, ...models] = process.argv.slice(2);
const cases = JSON.parse(readFileSync(casesPath, "utf8"));
const attempt = (fn) => {
  try {
    return { value: fn() };
  } catch (error) {
    return { error: error.message, code: error.code };
  }
};
const out = {
  parse: cases.parse.map((c) => attempt(() => parseHubRef(c.text))),
  urls: cases.urls.map((c) => attempt(() => {
    const ref = parseHubRef(c.ref);
    return hubFileURL(ref, ref.file, c.endpoint);
  })),
  choose: cases.choose.map((c) => attempt(() => chooseHubFiles(parseHubRef(c.ref), c.files))),
  resolve: [],
};
for (const model of models) {
  try {
    out.resolve.push({ value: await resolveModelURL(model, { endpoint }) });
  } catch (error) {
    out.resolve.push({ error: error.message, code: error.code });
  }
}
process.stdout.write(JSON.stringify(out));
