// Loaded with `node --import`: maps the contract's import specifiers (`factbuoy:plugin/...`,
// `wasi:...`), which only componentize-js knows, to the recorders in stub-host.js.
import { register } from "node:module";

register(
  "data:text/javascript," +
    encodeURIComponent(`
      export async function resolve(specifier, context, next) {
        const match = /^(factbuoy:plugin|wasi:filesystem)\\/([a-z-]+)@/.exec(specifier);
        if (!match) return next(specifier, context);
        return { url: new URL("./stub-host.js?" + match[2], ${JSON.stringify(import.meta.url)}).href, shortCircuit: true };
      }
    `),
);
