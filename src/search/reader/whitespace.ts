/**
 * Caps runs of whitespace in a page's text. Pages are chosen by the requester, and regexes on the
 * way to markdown and text (turndown's trim of trailing whitespace among them) take time quadratic
 * in the length of a run: 400,000 spaces in a <pre> kept a thread busy for close to a minute. A
 * reader needs no more than a line's width of whitespace in a row, so longer runs are cut before
 * any of those regexes sees the text: in the raw HTML, and in the parsed DOM across text nodes (a
 * run can be spread over many elements, or written as entities) and line breaks.
 */

/** The longest whitespace run kept, in characters. */
export const maxWhitespaceRun = 64;

/**
 * `text` with every whitespace run cut to `max` characters. `carried` is the length of the run
 * the text before it ended with; `trailing` is the length of the run the result ends with (the
 * carried one included when the whole text is whitespace).
 */
export function capWhitespaceRuns(
  text: string,
  carried = 0,
  max = maxWhitespaceRun,
): { text: string; trailing: number } {
  let trailing = 0;
  // `\s+` always consumes the whole run it starts on: linear in the text.
  const capped = text.replace(/\s+/g, (run: string, offset: number) => {
    const before = offset === 0 ? carried : 0;
    const kept = run.slice(0, Math.max(0, max - before));
    if (offset + run.length === text.length) trailing = before + kept.length;
    return kept;
  });
  return { text: capped, trailing: text.length === 0 ? carried : trailing };
}

interface DomNode {
  nodeType: number;
  nodeName: string;
  data?: string;
  remove(): void;
}

interface DomDocument {
  createTreeWalker(root: unknown, whatToShow: number): { nextNode(): DomNode | null };
}

/** turndown writes a <br> as two spaces and a newline. */
const lineBreakLength = 3;

/**
 * Caps the whitespace runs of a parsed document's text in document order: runs continue across
 * elements, and a <br> counts as the whitespace it becomes (one over the cap is removed).
 */
export function capDocumentWhitespace(document: DomDocument, root: unknown, max = maxWhitespaceRun): void {
  const SHOW_ELEMENT = 1;
  const SHOW_TEXT = 4;
  const walker = document.createTreeWalker(root, SHOW_ELEMENT | SHOW_TEXT);
  const extraBreaks: DomNode[] = [];
  let run = 0;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.nodeType === 3) {
      const capped = capWhitespaceRuns(node.data ?? '', run, max);
      if (capped.text !== node.data) node.data = capped.text;
      run = capped.trailing;
    } else if (node.nodeName === 'BR') {
      if (run + lineBreakLength > max) extraBreaks.push(node);
      else run += lineBreakLength;
    }
  }
  for (const node of extraBreaks) node.remove();
}
