// A small XML well-formedness check for SVG output: balanced tags, quoted
// attributes, no raw `<` or `&` in text. Enough to catch broken markup
// without an XML library (none is reachable here).

/** Parsed element: name, attributes and children, in document order. */
export interface XmlElement {
  name: string;
  attrs: Record<string, string>;
  children: XmlElement[];
  text: string;
}

const ENTITY = /^&(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);/;

function unescape(s: string): string {
  return s.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'").replace(/&amp;/g, "&");
}

function checkText(s: string, where: number): void {
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "<") throw new SyntaxError(`raw '<' in text at ${where + i}`);
    if (s[i] === "&" && !ENTITY.test(s.slice(i))) {
      throw new SyntaxError(`bad entity at ${where + i}: ${s.slice(i, i + 10)}`);
    }
  }
}

/** Parses `src` strictly; throws SyntaxError on malformed markup. Returns the root. */
export function parseXml(src: string): XmlElement {
  const tag = /<(\/?)([A-Za-z][\w:.-]*)((?:\s+[\w:.-]+="[^"<]*")*)\s*(\/?)>/y;
  const attr = /([\w:.-]+)="([^"<]*)"/g;
  const stack: XmlElement[] = [];
  let root: XmlElement | null = null;
  let i = 0;
  while (i < src.length) {
    const lt = src.indexOf("<", i);
    const text = lt < 0 ? src.slice(i) : src.slice(i, lt);
    checkText(text, i);
    if (stack.length > 0) stack[stack.length - 1].text += unescape(text);
    else if (text.trim() !== "") throw new SyntaxError(`text outside the root at ${i}`);
    if (lt < 0) break;
    tag.lastIndex = lt;
    const m = tag.exec(src);
    if (m === null) throw new SyntaxError(`malformed tag at ${lt}: ${src.slice(lt, lt + 40)}`);
    const [, close, name, attrText, selfClose] = m;
    if (close) {
      const open = stack.pop();
      if (open === undefined || open.name !== name) {
        throw new SyntaxError(`</${name}> at ${lt} closes ${open ? `<${open.name}>` : "nothing"}`);
      }
    } else {
      const el: XmlElement = { name, attrs: {}, children: [], text: "" };
      for (const a of attrText.matchAll(attr)) {
        checkText(a[2], lt);
        if (a[1] in el.attrs) throw new SyntaxError(`duplicate attribute ${a[1]} at ${lt}`);
        el.attrs[a[1]] = unescape(a[2]);
      }
      if (stack.length > 0) stack[stack.length - 1].children.push(el);
      else if (root === null) root = el;
      else throw new SyntaxError(`second root element <${name}> at ${lt}`);
      if (!selfClose) stack.push(el);
    }
    i = tag.lastIndex;
  }
  if (stack.length > 0) throw new SyntaxError(`unclosed <${stack[stack.length - 1].name}>`);
  if (root === null) throw new SyntaxError("no root element");
  return root;
}

/** All elements of the tree, depth first. */
export function allElements(root: XmlElement): XmlElement[] {
  const out: XmlElement[] = [root];
  for (const c of root.children) out.push(...allElements(c));
  return out;
}
