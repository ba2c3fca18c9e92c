// Bundles the GraphiQL page into ../graphiql/ (embedded by web/web.go and
// served at /graphiql): src/main.jsx with GraphiQL, React, graphql and
// graphql-ws as one minified ES module (graphiql.js) and one stylesheet
// (graphiql.css), the page (index.html, copied from src/), and the licences
// of every package in the bundle (LICENSES.txt).
//
// Run it with `make graphiql` (npm ci, then this script): the versions come
// from package-lock.json and esbuild's output depends only on its inputs, so
// the same lock file gives the same bytes. The output folder is generated
// whole; don't edit it.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import * as esbuild from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(here, '../graphiql');

/**
 * Drops the @font-face rules of GraphiQL's stylesheet: they inline Roboto and
 * Fira Code as data: URLs (about 380 KB). The page uses the system's sans-serif
 * and monospace fonts instead (src/page.css), and its policy loads no fonts.
 */
const withoutFonts = {
  name: 'graphiql-without-fonts',
  setup(build) {
    build.onLoad({ filter: /[\\/]graphiql[\\/]dist[\\/]style\.css$/ }, async (args) => {
      const css = await fs.promises.readFile(args.path, 'utf8');
      const stripped = css.replace(/@font-face\s*\{[^}]*\}\s*/g, '');
      if (stripped === css) throw new Error(`${args.path}: no @font-face rules found; check build.mjs against this GraphiQL version`);
      return { contents: stripped, loader: 'css' };
    });
  },
};

fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });

const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: { graphiql: 'src/main.jsx' },
  outdir: out,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022', 'chrome111', 'firefox111', 'safari16.4'],
  jsx: 'automatic',
  minify: true,
  sourcemap: false,
  // Licences go to LICENSES.txt, from each package's own files.
  legalComments: 'none',
  charset: 'utf8',
  define: { 'process.env.NODE_ENV': '"production"' },
  metafile: true,
  logLevel: 'warning',
  plugins: [withoutFonts],
});

fs.copyFileSync(path.join(here, 'src/index.html'), path.join(out, 'index.html'));

/** The folder of the package that holds a bundled input, or null for ours. */
function packageDir(input) {
  const parts = input.split('/');
  const i = parts.lastIndexOf('node_modules');
  if (i < 0) return null;
  const n = parts[i + 1].startsWith('@') ? 2 : 1;
  return parts.slice(0, i + 1 + n).join('/');
}

const dirs = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const dir = packageDir(input);
  if (dir) dirs.add(dir);
}
const licences = [...dirs]
  .map((dir) => {
    const pkg = JSON.parse(fs.readFileSync(path.join(here, dir, 'package.json'), 'utf8'));
    const file = fs.readdirSync(path.join(here, dir)).filter((f) => /^(licen[sc]e|copying)(\.|$)/i.test(f)).sort()[0];
    const text = file ? fs.readFileSync(path.join(here, dir, file), 'utf8').trim() : `(no licence file in the package; package.json says ${pkg.license})`;
    return { id: `${pkg.name}@${pkg.version}`, licence: pkg.license, text };
  })
  .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
// One block per distinct licence text, naming the packages it covers.
const blocks = new Map();
for (const l of licences) {
  if (!blocks.has(l.text)) blocks.set(l.text, []);
  blocks.get(l.text).push(l.id);
}
fs.writeFileSync(
  path.join(out, 'LICENSES.txt'),
  `Packages bundled into graphiql.js and graphiql.css (web/graphiql-src, make graphiql):\n\n` +
    licences.map((l) => `${l.id} (${l.licence})`).join('\n') +
    '\n\n' +
    [...blocks].map(([text, ids]) => `${'='.repeat(78)}\n${ids.join('\n')}\n${'='.repeat(78)}\n\n${text}\n`).join('\n'),
);

for (const name of fs.readdirSync(out).sort()) {
  const { size } = fs.statSync(path.join(out, name));
  console.log(`${path.relative(path.resolve(here, '../..'), path.join(out, name))}\t${(size / 1024).toFixed(1)} KiB`);
}
