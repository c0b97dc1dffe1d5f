// Turns a stream of text chunks into whole lines; a last line without a newline comes out on flush().
// Very long lines are cut so one write without newlines cannot grow a buffer without bound.

export const MAX_LINE_CHARS = 16 * 1024;

export class LineSplitter {
  private partial = '';

  constructor(
    private readonly emit: (line: string) => void,
    private readonly maxChars = MAX_LINE_CHARS,
  ) {}

  write(text: string): void {
    let start = 0;
    for (;;) {
      const nl = text.indexOf('\n', start);
      if (nl < 0) break;
      this.emitLine(this.partial + text.slice(start, nl));
      this.partial = '';
      start = nl + 1;
    }
    this.partial += text.slice(start);
    while (this.partial.length > this.maxChars) {
      this.emit(this.partial.slice(0, this.maxChars));
      this.partial = this.partial.slice(this.maxChars);
    }
  }

  flush(): void {
    if (this.partial.length > 0) this.emitLine(this.partial);
    this.partial = '';
  }

  private emitLine(line: string): void {
    const l = line.endsWith('\r') ? line.slice(0, -1) : line;
    for (let i = 0; i < l.length; i += this.maxChars) this.emit(l.slice(i, i + this.maxChars));
    if (l.length === 0) this.emit('');
  }
}
