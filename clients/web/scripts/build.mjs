// Bundles the client into dist/: index.html, one JS file and one CSS file, named by their
// content so that a browser never runs a stale bundle after a rebuild, and a .gz beside each
// for the gateway to serve to browsers that accept gzip.

import { build } from "esbuild";
import { mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { gzipSync } from "node:zlib";

const DIST = "dist";
// The budget for the whole client, gzipped.
const BUDGET_BYTES = 300 * 1024;

await rm(DIST, { recursive: true, force: true });
await mkdir(DIST);
const result = await build({
  entryPoints: { app: "src/main.ts" },
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  outdir: DIST,
  entryNames: "[name]-[hash]",
  metafile: true,
  legalComments: "none",
  logLevel: "warning",
});
const outputs = Object.keys(result.metafile.outputs).map((path) => basename(path));
const named = (extension) => {
  const found = outputs.find((name) => name.endsWith(extension));
  if (found === undefined) {
    throw new Error(`esbuild wrote no ${extension} file`);
  }
  return found;
};
const page = (await readFile("src/index.html", "utf8"))
  .replace('href="/app.css"', `href="/${named(".css")}"`)
  .replace('src="/app.js"', `src="/${named(".js")}"`);
await writeFile(join(DIST, "index.html"), page);

let total = 0;
for (const name of await readdir(DIST)) {
  const data = await readFile(join(DIST, name));
  const packed = gzipSync(data, { level: 9 });
  await writeFile(join(DIST, `${name}.gz`), packed);
  total += packed.length;
  console.log(`${name.padEnd(28)} ${String(data.length).padStart(8)} B  ${String(packed.length).padStart(7)} B gzipped`);
}
console.log(`total ${(total / 1024).toFixed(1)} kB gzipped (budget ${BUDGET_BYTES / 1024} kB)`);
if (total > BUDGET_BYTES) {
  console.error("the bundle is over its budget");
  process.exit(1);
}
