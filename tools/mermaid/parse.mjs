// Parse mermaid diagrams with mermaid's own parser (tests/test_diagrams.py runs this).
//
// stdin: a JSON list of {"where": "README.md:42", "source": "flowchart LR\n..."}; stdout: a JSON list of
// {"where", "type"} for a diagram that parses, {"where", "error"} for one that does not.
//
// mermaid.parse() runs the diagram type's grammar, as GitHub's renderer does before it draws; it sanitizes labels
// with DOMPurify, which needs a DOM: linkedom's, as no browser is needed to parse.
import { parseHTML } from "linkedom";

const dom = parseHTML("<!doctype html><html><body></body></html>");
globalThis.window = dom;
globalThis.document = dom.document;

const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false });

let input = "";
for await (const chunk of process.stdin) input += chunk;

const results = [];
for (const { where, source } of JSON.parse(input)) {
  try {
    const parsed = await mermaid.parse(source);
    results.push({ where, type: parsed.diagramType });
  } catch (error) {
    results.push({ where, error: String(error?.message ?? error) });
  }
}
process.stdout.write(JSON.stringify(results));
