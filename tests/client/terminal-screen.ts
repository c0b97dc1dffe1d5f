// A model of a terminal for tests: replays the bytes a program wrote (text, `\r`, `\n`, `\x1b[2K`; other escape
// sequences such as colours are dropped) and gives the lines left on the screen.
export class Screen {
  private readonly lines: string[] = [''];
  private row = 0;
  private col = 0;

  write(s: string): void {
    for (let i = 0; i < s.length; i++) {
      const c = s[i]!;
      if (c === '\x1b') {
        // biome-ignore lint/suspicious/noControlCharactersInRegex: a terminal's escape sequences are what this reads
        const m = /^\x1b\[([0-9;?]*)([A-Za-z])/.exec(s.slice(i));
        if (m) {
          if (m[2] === 'K' && m[1] === '2') this.lines[this.row] = '';
          i += m[0].length - 1;
        }
        continue;
      }
      if (c === '\r') this.col = 0;
      else if (c === '\n') {
        this.row++;
        this.col = 0;
        if (this.lines.length <= this.row) this.lines.push('');
      } else {
        const line = this.lines[this.row]!.padEnd(this.col, ' ');
        this.lines[this.row] = line.slice(0, this.col) + c + line.slice(this.col + 1);
        this.col++;
      }
    }
  }

  /** The screen's lines, trailing spaces trimmed, the empty last line dropped. */
  text(): string[] {
    const out = this.lines.map((l) => l.trimEnd());
    while (out.length > 0 && out[out.length - 1] === '') out.pop();
    return out;
  }
}
