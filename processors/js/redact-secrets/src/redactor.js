// The scan: finds secrets in a text, left to right, and replaces them. A port
// of the Rust processor's `redactor.rs`, position for position.

import { ProcessorError } from "agent-host-guest";
import { BEARER, BUILTINS, EMAIL, builtin, isAlnum, matchAt } from "./kinds.js";
import { translatePattern } from "./pattern.js";

/** The kinds that run when `kinds` is not given: all but `email`. */
const DEFAULT_KINDS = BUILTINS.filter((k) => k !== EMAIL);

/** Whether char code `c` may be in an e-mail address's local part. */
const isLocal = (c) => isAlnum(c) || c === 0x2e || c === 0x5f || c === 0x25 || c === 0x2b || c === 0x2d;

/**
 * The position of the character after the one at `at`: a surrogate pair is
 * one character, as a Rust `char` is.
 */
function nextChar(text, at) {
  const c = text.charCodeAt(at);
  if (c >= 0xd800 && c <= 0xdbff) {
    const d = text.charCodeAt(at + 1);
    if (d >= 0xdc00 && d <= 0xdfff) return at + 2;
  }
  return at + 1;
}

/**
 * The first e-mail candidate with an `@` at or after `search`: where its
 * local part starts (the longest run of local-part characters before the
 * `@`, not reaching before `from`) and the `@`; null when there is none.
 */
function nextEmail(text, from, search) {
  for (;;) {
    const at = text.indexOf("@", search);
    if (at < 0) return null;
    let start = at;
    while (start > from && isLocal(text.charCodeAt(start - 1))) start--;
    if (start < at) return { start, at };
    search = at + 1;
  }
}

/**
 * The literal text every match of `pattern` starts with, if it is plain to
 * see: the ASCII letters, digits, `_` and `-` it opens with (after a `\b`),
 * less the last one when a quantifier follows it. Null when the pattern has
 * a `|` anywhere (an alternative could start otherwise).
 * @param {string} pattern
 * @returns {string | null}
 */
export function literalPrefix(pattern) {
  if (pattern.includes("|")) return null;
  const rest = pattern.startsWith("\\b") ? pattern.slice(2) : pattern;
  const end = rest.search(/[^A-Za-z0-9_-]|$/);
  let prefix = rest.slice(0, end);
  if ("*+?{".includes(rest[end] ?? "\0")) prefix = prefix.slice(0, -1);
  return prefix === "" ? null : prefix;
}

/** A pattern from `extra`, compiled. */
class Extra {
  constructor(name, pattern) {
    this.name = name;
    const { source, flags, hasSecret } = translatePattern(pattern);
    this.regex = new RegExp(source, `${flags}dgu`);
    this.hasSecret = hasSecret;
    this.prefix = literalPrefix(pattern);
  }

  /**
   * The pattern's first usable match at or after `from`: not empty, and with
   * a non-empty `secret` group when it has that group. Null when there is
   * none in the rest of the text.
   */
  find(text, from) {
    while (from <= text.length) {
      // No match starts before the prefix's next occurrence.
      if (this.prefix !== null) {
        from = text.indexOf(this.prefix, from);
        if (from < 0) return null;
      }
      this.regex.lastIndex = from;
      const m = this.regex.exec(text);
      if (m === null) return null;
      const start = m.index;
      const end = start + m[0].length;
      const secret = this.hasSecret ? m.indices.groups.secret : [start, end];
      if (secret !== undefined && secret[1] > secret[0]) {
        return { start, end, secretStart: secret[0], secretEnd: secret[1] };
      }
      from = nextChar(text, start);
    }
    return null;
  }
}

/**
 * The positions where a built-in kind may start, in order: a superset of
 * those where one is triggered (`matchAt` checks each). Found with one regex
 * search for the kinds' literals in an ASCII-lowercased copy of the text
 * (the case-insensitive kinds need no `[Bb][Ee]...` there), one search per
 * candidate. When lowercasing changes the length (U+0130 becomes two code
 * units) the copy's positions would be wrong, so the kinds' own trigger
 * regex runs over the text instead.
 */
class Candidates {
  constructor(redactor, text) {
    const lower = text.toLowerCase();
    const exact = lower.length !== text.length;
    this.source = exact ? text : lower;
    this.regex = exact ? redactor.trigger : redactor.lowerTrigger;
    /** The first candidate at or after the last `from` asked (-1: none yet). */
    this.at = -1;
  }

  /** The first candidate at or after `from` (which only grows), or the length. */
  next(from) {
    if (this.at >= from) return this.at;
    const len = this.source.length;
    if (this.regex === null) return (this.at = len);
    this.regex.lastIndex = from;
    const m = this.regex.exec(this.source);
    this.at = m === null ? len : m.index;
    return this.at;
  }
}

/** What an extra pattern's next match is before it has been looked for. */
const UNKNOWN = undefined;

/**
 * The secrets a configuration looks for, compiled once and applied to any
 * number of texts.
 */
export class Redactor {
  /**
   * Compiles `config` (as parsed by the processor's spec), or throws a
   * `bad-config` error that says what is wrong with it.
   * @param {{emails: boolean, kinds: string[] | null, extra: {name: string, pattern: string}[], placeholder: string}} config
   */
  constructor(config) {
    let builtins;
    if (config.kinds === null) {
      builtins = DEFAULT_KINDS.slice();
    } else {
      for (const name of config.kinds) {
        if (builtin(name) === undefined) {
          const valid = BUILTINS.map((k) => k.name).join(", ");
          throw ProcessorError.badConfig(`unknown kind ${JSON.stringify(name)} in \`kinds\`; the kinds are ${valid}`);
        }
      }
      builtins = BUILTINS.filter((k) => config.kinds.includes(k.name));
    }
    if (config.emails && !builtins.includes(EMAIL)) builtins.push(EMAIL);
    /** The built-in kinds that run, in priority order. */
    this.builtins = builtins;
    /** Whether e-mail addresses are looked for. */
    this.email = builtins.includes(EMAIL);

    /** The configured patterns, after the built-in kinds. @type {Extra[]} */
    this.extras = [];
    for (const { name, pattern } of config.extra) {
      if (name === "" || !/^[A-Za-z0-9_.-]+$/.test(name)) {
        throw ProcessorError.badConfig(
          `extra pattern name ${JSON.stringify(name)}: use ASCII letters, digits, \`-\`, \`_\` and \`.\``,
        );
      }
      if (builtin(name) !== undefined || this.extras.some((e) => e.name === name)) {
        throw ProcessorError.badConfig(
          `extra pattern name ${JSON.stringify(name)} is already taken; give each pattern its own name`,
        );
      }
      let extra;
      try {
        extra = new Extra(name, pattern);
      } catch (e) {
        const why = e instanceof SyntaxError ? e.message : String(e.message ?? e);
        throw ProcessorError.badConfig(`extra pattern ${JSON.stringify(name)} is not a valid regex: ${why}`);
      }
      extra.regex.lastIndex = 0;
      if (extra.regex.test("")) {
        throw ProcessorError.badConfig(
          `extra pattern ${JSON.stringify(name)} matches the empty string; it must match at least one character`,
        );
      }
      this.extras.push(extra);
    }
    if (this.builtins.length === 0 && this.extras.length === 0) {
      throw ProcessorError.badConfig(
        "nothing to look for: `kinds` is empty, `emails` is false and there is no `extra` pattern",
      );
    }

    if (config.placeholder === "") {
      throw ProcessorError.badConfig("`placeholder` is empty; a reader could not tell that something was removed");
    }
    /** The placeholder of each kind: the built-in ones, then the extras. */
    this.placeholders = [...this.builtins.map((k) => k.name), ...this.extras.map((e) => e.name)].map((kind) =>
      config.placeholder.replaceAll("{kind}", kind),
    );

    // What every match of a built-in kind starts with (email aside), as one
    // regex over a lowercased copy of the text and as one over the text
    // itself (see `Candidates`).
    const kinds = this.builtins.filter((k) => k !== EMAIL);
    const literals = [...new Set(kinds.flatMap((k) => k.literals))].map((l) =>
      l.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&"),
    );
    this.lowerTrigger = literals.length ? new RegExp(literals.join("|"), "g") : null;
    this.trigger = kinds.length ? new RegExp(kinds.map((k) => k.trigger).join("|"), "g") : null;

    // A placeholder that would itself be redacted would make a second run
    // change the text again.
    for (const placeholder of this.placeholders) {
      const found = this.matches(placeholder);
      if (found.length > 0) {
        throw ProcessorError.badConfig(
          `\`placeholder\` ${JSON.stringify(placeholder)} would itself be redacted as ${found[0].kind}; choose one that holds no secret`,
        );
      }
    }
  }

  /** How many kinds run: the built-in ones, then the extra patterns. */
  kindCount() {
    return this.placeholders.length;
  }

  /** The name of kind `index` (see `kindCount`). */
  kindName(index) {
    return index < this.builtins.length ? this.builtins[index].name : this.extras[index - this.builtins.length].name;
  }

  /** `text` with its secrets replaced, or null when it holds none. */
  redact(text) {
    return this.redactCounting(text, new Array(this.kindCount()).fill(0));
  }

  /**
   * Like `redact`, and adds one to `counts[kind]` for each secret replaced
   * (`counts` has `kindCount()` entries).
   */
  redactCounting(text, counts) {
    let out = null;
    let copied = 0;
    this.scan(text, (kind, start, end) => {
      out = (out ?? "") + text.slice(copied, start) + this.placeholders[kind];
      copied = end;
      counts[kind] += 1;
    });
    return out === null ? null : out + text.slice(copied);
  }

  /** The secrets in `text`: each one's kind and where it is. */
  matches(text) {
    const found = [];
    this.scan(text, (kind, start, end) => found.push({ kind: this.kindName(kind), start, end }));
    return found;
  }

  /**
   * Calls `found(kind, secretStart, secretEnd)` for each secret in `text`,
   * left to right.
   *
   * The rule (see the Rust crate's doc): at each position, the kinds are
   * tried in priority order and the first that matches wins; the scan goes on
   * after its match, or at the next character when none matches. The work
   * here only goes into finding the positions where a kind can start.
   */
  scan(text, found) {
    const len = text.length;
    // The next e-mail candidate ({start, at} of its local part and `@`).
    let email = null;
    let emailFrom = 0;
    // Each extra pattern's next match: UNKNOWN, a hit, or null for none.
    const extras = this.extras.map(() => UNKNOWN);
    // The end of the last replacement and its kind, for the character
    // before a position as it stands in the output.
    let lastEnd = -1;
    let lastKind = -1;
    const candidates = new Candidates(this, text);
    const findTrigger = (from) => candidates.next(from);
    let trigger = findTrigger(0);
    let i = 0;
    while (i < len) {
      if (trigger < i) trigger = findTrigger(i);
      let c = trigger;
      if (this.email) {
        if (email !== null && email.start < i) email = null;
        if (email === null && emailFrom < len) {
          email = nextEmail(text, i, Math.max(emailFrom, i));
          emailFrom = email === null ? len : email.at;
        }
        if (email !== null) c = Math.min(c, email.start);
      }
      for (let x = 0; x < extras.length; x++) {
        if (extras[x] && extras[x].start < i) extras[x] = UNKNOWN;
        if (extras[x] === UNKNOWN) extras[x] = this.extras[x].find(text, i);
        if (extras[x]) c = Math.min(c, extras[x].start);
      }
      if (c >= len) break;

      const prev =
        lastEnd === c
          ? this.placeholders[lastKind].charCodeAt(this.placeholders[lastKind].length - 1)
          : text.charCodeAt(c - 1); // NaN at 0: no character
      let kind = -1;
      let hit = null;
      for (let k = 0; k < this.builtins.length; k++) {
        const b = this.builtins[k];
        if (b === EMAIL && (email === null || email.start !== c)) continue;
        const h = matchAt(b, text, c, prev);
        if (h === null) continue;
        if (b === BEARER && this.takenByAnother(text, h.secretStart)) continue;
        if (text.slice(h.secretStart, h.secretEnd) !== this.placeholders[k]) {
          kind = k;
          hit = h;
          break;
        }
      }
      if (hit === null) {
        for (let x = 0; x < extras.length; x++) {
          const k = this.builtins.length + x;
          const h = extras[x];
          if (h && h.start === c && text.slice(h.secretStart, h.secretEnd) !== this.placeholders[k]) {
            kind = k;
            hit = h;
            break;
          }
        }
      }
      if (hit !== null) {
        found(kind, hit.secretStart, hit.secretEnd);
        lastEnd = hit.secretEnd;
        lastKind = kind;
        i = hit.end;
      } else {
        // An address that fails at the start of its local part fails from
        // every later start too: go past its `@`.
        if (email !== null && email.start === c) {
          emailFrom = email.at + 1;
          email = null;
        }
        i = nextChar(text, c);
      }
    }
  }

  /**
   * Whether another built-in kind matches where a bearer token starts (it is
   * then typed by that kind, which the scan reaches next).
   */
  takenByAnother(text, at) {
    const prev = text.charCodeAt(at - 1);
    return this.builtins.some((b) => b !== BEARER && matchAt(b, text, at, prev) !== null);
  }
}
