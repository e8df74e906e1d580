// Extra patterns are written in the syntax of Rust's `regex-lite` (the Rust
// processor's), so that one configuration works with both processors. This
// turns such a pattern into a JavaScript regex (run with the `u` flag) that
// matches the same text, or throws a SyntaxError that says what has no
// JavaScript equivalent.
//
// What changes: `(?P<name>...)` becomes `(?<name>...)`, `\A` and `\z` become
// `^` and `$`, `\s` and `\S` become the ASCII classes Rust means by them
// (JavaScript's `\s` also takes Unicode spaces), `.` becomes `[^\n]` (it
// also stops at `\r`, U+2028 and U+2029 in JavaScript), `[[:alpha:]]`-style
// classes are spelt out, and flags at the start (`(?i)`, `(?m)`, `(?s)`)
// become regex flags. What is refused: flags anywhere else or scoped
// (`(?i:...)`), class set operations (`&&`, `--`, `~~`), nested classes and
// `\S` inside a class (JavaScript classes cannot say them without the `v`
// flag), Unicode classes (`\p{...}`, which regex-lite refuses too), and back
// references and look-around (which Rust refuses too).

/** ASCII whitespace as Rust's `\s` means it. */
const SPACE = String.raw`\t\n\x0B\x0C\r `;

/** POSIX classes, as `regex-lite` defines them (ASCII only). */
const POSIX = {
  alnum: "0-9A-Za-z",
  alpha: "A-Za-z",
  ascii: String.raw`\x00-\x7F`,
  blank: String.raw`\t `,
  cntrl: String.raw`\x00-\x1F\x7F`,
  digit: "0-9",
  graph: "!-~",
  lower: "a-z",
  print: " -~",
  punct: String.raw`!-\/:-@\[-\x60\{-~`,
  space: SPACE,
  upper: "A-Z",
  word: "0-9A-Za-z_",
  xdigit: "0-9A-Fa-f",
};

/** Characters that must stay escaped in a JavaScript `u` regex. */
const SYNTAX = "^$\\.*+?()[]{}|/";

/**
 * The JavaScript form of a `regex-lite` pattern.
 * @param {string} pattern
 * @returns {{source: string, flags: string, hasSecret: boolean}}
 */
export function translatePattern(pattern) {
  const chars = [...pattern];
  let out = "";
  let flags = "";
  let hasSecret = false;
  let i = 0;
  const fail = (why) => {
    throw new SyntaxError(`${why} (at character ${i + 1}; the JavaScript port supports the common syntax only)`);
  };

  // Flags at the very start apply to the whole pattern.
  const lead = /^\(\?([imsU]+)\)/.exec(pattern);
  if (lead) {
    for (const f of lead[1]) {
      if (f === "U") fail("the swap-greed flag `U` has no JavaScript equivalent");
      if (!flags.includes(f)) flags += f;
    }
    i = lead[0].length;
  }
  const dot = flags.includes("s") ? "[\\s\\S]" : "[^\\n]";

  /** An escape (`chars[i]` is the character after the backslash). */
  const escape = (inClass) => {
    const c = chars[i];
    if (c === undefined) fail("a pattern cannot end with `\\`");
    if ("dwDW".includes(c)) return `\\${c}`;
    if (c === "s") return inClass ? SPACE : `[${SPACE}]`;
    if (c === "S") return inClass ? fail("`\\S` inside a class") : `[^${SPACE}]`;
    if ("ntrfv".includes(c)) return `\\${c}`;
    if (!inClass && (c === "b" || c === "B")) return `\\${c}`;
    if (!inClass && c === "A") return "^";
    if (!inClass && c === "z") return "$";
    if (c === "x") {
      if (chars[i + 1] === "{") {
        const close = chars.indexOf("}", i);
        const hex = chars.slice(i + 2, close).join("");
        if (close < 0 || !/^[0-9A-Fa-f]{1,6}$/.test(hex)) fail("a bad `\\x{...}` escape");
        i = close;
        return `\\u{${hex}}`;
      }
      const hex = chars.slice(i + 1, i + 3).join("");
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) fail("a bad `\\x` escape");
      i += 2;
      return `\\x${hex}`;
    }
    if (c === "p" || c === "P") fail("Unicode classes (`\\p`) are not supported");
    if (/[0-9]/.test(c)) fail("back references are not supported");
    if (SYNTAX.includes(c)) return `\\${c}`;
    if (c === "-") return inClass ? "\\-" : "-";
    if ("#&~ ".includes(c)) return c;
    return fail(`the escape \`\\${c}\` is not supported`);
  };

  for (; i < chars.length; i++) {
    const c = chars[i];
    if (c === "\\") {
      i++;
      out += escape(false);
    } else if (c === ".") {
      out += dot;
    } else if (c === "(") {
      if (chars[i + 1] !== "?") {
        out += "(";
        continue;
      }
      const rest = chars.slice(i + 2, i + 4).join("");
      const named = /^\?P?<([A-Za-z_][A-Za-z0-9_]*)>/.exec(chars.slice(i + 1, i + 40).join(""));
      if (named) {
        out += `(?<${named[1]}>`;
        hasSecret ||= named[1] === "secret";
        i += named[0].length;
      } else if (rest.startsWith(":")) {
        out += "(?:";
        i += 2;
      } else if (/^[=!]|^<[=!]/.test(rest)) {
        fail("look-around is not supported");
      } else {
        fail("flags are only supported at the start of the pattern (`(?i)...`), not scoped");
      }
    } else if (c === "[") {
      out += "[";
      i++;
      if (chars[i] === "^") {
        out += "^";
        i++;
      }
      // A `]` first in a class is a literal one in Rust.
      if (chars[i] === "]") {
        out += "\\]";
        i++;
      }
      for (; i < chars.length && chars[i] !== "]"; i++) {
        const d = chars[i];
        const pair = d + (chars[i + 1] ?? "");
        if (d === "\\") {
          i++;
          out += escape(true);
        } else if (d === "[") {
          const posix = /^\[:(\^?)([a-z]+):\]/.exec(chars.slice(i, i + 12).join(""));
          if (!posix || !POSIX[posix[2]] || posix[1]) fail("nested classes are not supported");
          out += POSIX[posix[2]];
          i += posix[0].length - 1;
        } else if (pair === "&&" || pair === "--" || pair === "~~") {
          fail(`class set operations (\`${pair}\`) are not supported`);
        } else if ("/{}()|".includes(d)) {
          out += `\\${d}`;
        } else {
          out += d;
        }
      }
      if (i >= chars.length) fail("unclosed character class");
      out += "]";
    } else {
      out += c;
    }
  }
  return { source: out, flags, hasSecret };
}
