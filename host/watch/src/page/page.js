// What every page's script shares: finding and making elements (texts always through text
// nodes, never as HTML) and asking this server for JSON. A module, imported from this server
// alone, as the Content-Security-Policy allows (script-src 'self').

/// The element of id `id`.
export const $ = (id) => document.getElementById(id);

/// A new `tag` element with `attrs` (`class` as its class name) and `children`, each a node or
/// a text.
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") e.className = value;
    else e.setAttribute(key, value);
  }
  for (const child of children) {
    e.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return e;
}

/// The JSON answer of `url` (fetched with `options`); an answer that is not OK throws what the
/// server said (its `error`, else its text, else the HTTP status).
export async function json(url, options) {
  const answer = await fetch(url, options);
  const text = await answer.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON: said as text, if it is an error.
  }
  if (!answer.ok) throw new Error((body && body.error) || text || "HTTP " + answer.status);
  return body;
}
