/**
 * base/json-syntax.ts: where JSON text stops being JSON, said without the bytes (pure).
 *
 * JSON.parse's messages quote what they met (Bun names the first token, Node the first characters), so a config
 * file that is not JSON would put a piece of that file into an error, and from there into the log and a pod's
 * events (docs/reliability.md, "Errors never quote a file"). On a syntax error the callers ask this scanner
 * instead: it walks the text as RFC 8259 reads it and says what was expected where, by line and column only.
 * It runs only after JSON.parse has failed, so the good path pays nothing.
 */

/** "line L, column C: <what>", or undefined when the text is JSON after all. */
export function jsonSyntaxProblem(text: string): string | undefined {
  const s = new Scanner(text);
  try {
    s.ws();
    s.value(0);
    s.ws();
    if (s.i < text.length) s.fail('unexpected data after the JSON value');
    return undefined;
  } catch (e) {
    if (!(e instanceof SyntaxStop)) throw e;
    return `${s.where(e.at)}: ${e.what}`;
  }
}

/** JSON.parse's error replaced by the scanner's words: the message for "… is not valid JSON: <this>". */
export function jsonSyntaxMessage(text: string): string {
  return jsonSyntaxProblem(text) ?? 'invalid JSON';
}

class SyntaxStop {
  constructor(
    readonly at: number,
    readonly what: string,
  ) {}
}

/** Deeper than this is refused as JSON.parse would run out of stack; the scanner stops there too. */
const MAX_DEPTH = 10_000;

class Scanner {
  i = 0;
  constructor(private readonly t: string) {}

  fail(what: string, at = this.i): never {
    throw new SyntaxStop(at, this.i >= this.t.length && at >= this.t.length ? 'unexpected end of the text' : what);
  }

  where(at: number): string {
    let line = 1;
    let col = 1;
    for (let k = 0; k < at && k < this.t.length; k++) {
      if (this.t[k] === '\n') {
        line++;
        col = 1;
      } else col++;
    }
    return `line ${line}, column ${col}`;
  }

  ws(): void {
    while (this.i < this.t.length && ' \t\n\r'.includes(this.t[this.i]!)) this.i++;
  }

  value(depth: number): void {
    if (depth > MAX_DEPTH) this.fail('nested too deeply');
    const c = this.t[this.i];
    if (c === '{') return this.object(depth);
    if (c === '[') return this.array(depth);
    if (c === '"') return this.string();
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return this.number();
    for (const word of ['true', 'false', 'null']) {
      if (this.t.startsWith(word, this.i)) {
        this.i += word.length;
        return;
      }
    }
    this.fail('expected a JSON value');
  }

  object(depth: number): void {
    this.i++;
    this.ws();
    if (this.t[this.i] === '}') return void this.i++;
    for (;;) {
      if (this.t[this.i] !== '"') this.fail('expected a member name in double quotes');
      this.string();
      this.ws();
      if (this.t[this.i] !== ':') this.fail("expected ':' after the member name");
      this.i++;
      this.ws();
      this.value(depth + 1);
      this.ws();
      if (this.t[this.i] === '}') return void this.i++;
      if (this.t[this.i] !== ',') this.fail("expected ',' or '}' in the object");
      this.i++;
      this.ws();
    }
  }

  array(depth: number): void {
    this.i++;
    this.ws();
    if (this.t[this.i] === ']') return void this.i++;
    for (;;) {
      this.value(depth + 1);
      this.ws();
      if (this.t[this.i] === ']') return void this.i++;
      if (this.t[this.i] !== ',') this.fail("expected ',' or ']' in the array");
      this.i++;
      this.ws();
    }
  }

  string(): void {
    const start = this.i++;
    for (;;) {
      const c = this.t[this.i];
      if (c === undefined) this.fail('unterminated string', start);
      if (c === '"') return void this.i++;
      if (c < ' ') this.fail('a control character inside a string');
      if (c === '\\') {
        const e = this.t[this.i + 1];
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(this.t.slice(this.i + 2, this.i + 6))) this.fail('a bad \\u escape');
          this.i += 6;
          continue;
        }
        if (e === undefined || !'"\\/bfnrt'.includes(e)) this.fail('a bad escape in a string');
        this.i += 2;
        continue;
      }
      this.i++;
    }
  }

  number(): void {
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(this.t.slice(this.i, this.i + 400));
    if (!m || m[0] === '-' || m[0] === '') this.fail('a malformed number');
    this.i += m[0].length;
  }
}
