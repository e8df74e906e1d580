// The built-in kinds of secret: each one's name, literal trigger, pattern and
// the checks a match must pass. This is a port of the Rust processor's
// `kinds.rs`; its crate doc (processors/redact-secrets/src/lib.rs) states the
// rule both follow, and the integration test `lang_js` compares the two.
//
// The patterns are those of the Rust processor written for JavaScript: no
// `\A` (each regex is sticky, `y`, and runs with `lastIndex` at the
// position), `(?i:...)` spelt out as ASCII classes (`[Bb][Ee]...`), named
// groups as `(?<secret>...)`. Every character a rule looks at is ASCII, so
// positions in UTF-16 code units give the same matches as the Rust
// processor's byte positions.

/**
 * A built-in kind: its name, what every match starts with, and its pattern.
 * @typedef {object} Kind
 * @property {string} name the name in `kinds`, placeholders and the log
 * @property {string[]} literals what every match starts with, in ASCII
 *   lowercase: the redactor finds candidates by looking for these in a
 *   lowercased copy of the text (a superset of the real ones)
 * @property {string} trigger the same as a regex source, for texts whose
 *   lowercase copy would not keep the positions
 * @property {(text: string, at: number) => boolean} triggered whether the
 *   literal every match starts with is at `at`: a cheap test before the regex
 * @property {RegExp | null} regex sticky, with indices (`dy`); null for
 *   kinds found another way
 * @property {boolean} boundary whether the character before the match may not
 *   be a word character
 * @property {(text: string, hit: Hit, after: number) => boolean} accept the
 *   checks on a match the pattern cannot express
 */

/**
 * Where a kind matched, in UTF-16 code units of the text.
 * @typedef {object} Hit
 * @property {number} start where the match starts
 * @property {number} end where it ends: the scan goes on from here
 * @property {number} secretStart where the replaced part starts
 * @property {number} secretEnd where it ends
 */

/** Whether char code `c` is an ASCII digit. */
const isDigit = (c) => c >= 0x30 && c <= 0x39;
/** Whether char code `c` is an ASCII uppercase letter. */
const isUpper = (c) => c >= 0x41 && c <= 0x5a;
/** Whether char code `c` is an ASCII lowercase letter. */
const isLower = (c) => c >= 0x61 && c <= 0x7a;
/** Whether char code `c` is an ASCII letter or digit. */
export const isAlnum = (c) => isDigit(c) || isUpper(c) || isLower(c);

/**
 * ASCII letters, digits, `_` and `-`: what may not stand right before a
 * token (so `task-sk-list` holds no OpenAI key). NaN (no character) is not.
 */
export const isWord = (c) => isAlnum(c) || c === 0x5f || c === 0x2d;

/** Whether `s` holds an ASCII digit, an uppercase and a lowercase letter. */
function isMixed(s) {
  let digit = false;
  let upper = false;
  let lower = false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    digit ||= isDigit(c);
    upper ||= isUpper(c);
    lower ||= isLower(c);
  }
  return digit && upper && lower;
}

/** Whether `s` holds an ASCII digit. */
const hasDigit = (s) => /[0-9]/.test(s);

/** At least 16 characters of `A-Za-z0-9+/=` in a row: some key material. */
const hasBase64Run = (s) => /[A-Za-z0-9+/=]{16}/.test(s);

/** Whether `text` at `at` is `word` in any ASCII case (`word` is lowercase). */
function startsWithIgnoringAsciiCase(text, at, word) {
  if (at + word.length > text.length) return false;
  for (let i = 0; i < word.length; i++) {
    let c = text.charCodeAt(at + i);
    if (isUpper(c)) c += 0x20;
    if (c !== word.charCodeAt(i)) return false;
  }
  return true;
}

/** A sticky regex with match indices, for matching at one position. */
const sticky = (source) => new RegExp(source, "dy");

/** The same rule for every kind without extra checks. */
const always = () => true;

/**
 * Every built-in kind, in priority order: at one position, the first kind
 * that matches wins. Email has no trigger: the redactor finds its candidates
 * from the `@` back.
 * @type {Kind[]}
 */
export const BUILTINS = [
  {
    name: "private-key",
    literals: ["-----begin "],
    trigger: String.raw`-----BEGIN `,
    triggered: (t, at) => t.startsWith("-----BEGIN ", at),
    regex: sticky(
      String.raw`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=:, \t\r\n\\-]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?:\r?\n|(?:\\r)?\\n)[A-Za-z0-9+/=:, \t\r\n\\-]*)`,
    ),
    boundary: false,
    accept: (t, h) => hasBase64Run(t.slice(h.start, h.end)),
  },
  {
    name: "anthropic-key",
    literals: ["sk-ant-"],
    trigger: String.raw`sk-ant-`,
    triggered: (t, at) => t.startsWith("sk-ant-", at),
    regex: sticky(String.raw`sk-ant-[A-Za-z0-9_-]{16,}`),
    boundary: true,
    accept: (t, h) => isMixed(t.slice(h.start + "sk-ant-".length, h.end)),
  },
  {
    name: "openai-key",
    literals: ["sk-"],
    trigger: String.raw`sk-`,
    triggered: (t, at) => t.startsWith("sk-", at) && !t.startsWith("sk-ant-", at),
    regex: sticky(String.raw`sk-[A-Za-z0-9_-]{20,}`),
    boundary: true,
    accept: (t, h) => isMixed(t.slice(h.start + "sk-".length, h.end)),
  },
  {
    name: "aws-access-key",
    literals: ["akia", "asia"],
    trigger: String.raw`AKIA|ASIA`,
    triggered: (t, at) => t.startsWith("AKIA", at) || t.startsWith("ASIA", at),
    regex: sticky(String.raw`(?:AKIA|ASIA)[A-Z0-9]{16}`),
    boundary: true,
    accept: (t, h, after) => !isAlnum(after),
  },
  {
    name: "aws-secret-key",
    literals: ["secret"],
    trigger: String.raw`[Ss][Ee][Cc][Rr][Ee][Tt]`,
    triggered: (t, at) => startsWithIgnoringAsciiCase(t, at, "secret"),
    regex: sticky(
      String.raw`[Ss][Ee][Cc][Rr][Ee][Tt]_?[Aa][Cc][Cc][Ee][Ss][Ss]_?[Kk][Ee][Yy](?:\\?["'])?[ \t]*(?:=>|:|=)[ \t]*(?:\\?["'])?(?<secret>[A-Za-z0-9/+]{40})`,
    ),
    boundary: false,
    // Not followed by another character of the key's alphabet, nor `=`.
    accept: (t, h, after) => !(isAlnum(after) || after === 0x2f || after === 0x2b || after === 0x3d),
  },
  {
    name: "github-token",
    literals: ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
    trigger: String.raw`gh[pousr]_|github_pat_`,
    triggered: (t, at) => /gh[pousr]_|github_pat_/y.test(t.slice(at, at + 11)),
    regex: sticky(String.raw`(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})`),
    boundary: true,
    accept: always,
  },
  {
    name: "slack-webhook",
    literals: ["hooks.slack.com/"],
    trigger: String.raw`hooks\.slack\.com/`,
    triggered: (t, at) => t.startsWith("hooks.slack.com/", at),
    regex: sticky(String.raw`hooks\.slack\.com/(?:services|workflows|triggers)/(?<secret>[A-Za-z0-9_/-]{20,})`),
    boundary: false,
    accept: always,
  },
  {
    name: "slack-token",
    literals: ["xox", "xapp-"],
    trigger: String.raw`xox[a-z]-|xapp-`,
    triggered: (t, at) => /xox[a-z]-|xapp-/y.test(t.slice(at, at + 5)),
    regex: sticky(String.raw`(?:xox[a-z]|xapp)-[A-Za-z0-9-]{10,}`),
    boundary: true,
    accept: (t, h) => hasDigit(t.slice(h.start, h.end)),
  },
  {
    name: "bearer-token",
    literals: ["bearer"],
    trigger: String.raw`[Bb][Ee][Aa][Rr][Ee][Rr]`,
    triggered: (t, at) => startsWithIgnoringAsciiCase(t, at, "bearer"),
    regex: sticky(String.raw`[Bb][Ee][Aa][Rr][Ee][Rr][ \t]+(?<secret>[A-Za-z0-9._~+/-]+=*)`),
    boundary: true,
    accept: (t, h) => {
      const token = t.slice(h.secretStart, h.secretEnd);
      return token.length >= 16 && hasDigit(token);
    },
  },
  {
    name: "url-password",
    literals: ["://"],
    trigger: String.raw`://`,
    triggered: (t, at) => t.startsWith("://", at),
    regex: sticky(
      String.raw`://[^\t\n\x0B\x0C\r :/?#@\[\]"'<>\\${"`"}]*:(?<secret>[^\t\n\x0B\x0C\r /?#"'<>\\${"`"}]+)@`,
    ),
    boundary: false,
    // Not a template such as `${DB_PASSWORD}`.
    accept: (t, h) => t[h.secretStart] !== "$" && t[h.secretStart] !== "{",
  },
  {
    name: "email",
    literals: [],
    trigger: String.raw``,
    triggered: always,
    regex: sticky(String.raw`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`),
    boundary: false,
    accept: always,
  },
];

/** The built-in kind named `name`, or undefined. */
export const builtin = (name) => BUILTINS.find((k) => k.name === name);

/** The e-mail kind, which the redactor treats apart. */
export const EMAIL = builtin("email");

/** The bearer kind, which defers to the others where its token starts. */
export const BEARER = builtin("bearer-token");

/**
 * Kind `kind`'s match at `at` of `text`, if it has one there, or null.
 * `prev` is the char code before `at` as it stands in the redacted text
 * (the placeholder's last one right after a redaction), NaN at the start.
 * @param {Kind} kind
 * @param {string} text
 * @param {number} at
 * @param {number} prev
 * @returns {Hit | null}
 */
export function matchAt(kind, text, at, prev) {
  if (!kind.triggered(text, at) || (kind.boundary && isWord(prev))) return null;
  const re = kind.regex;
  re.lastIndex = at;
  const m = re.exec(text);
  if (m === null) return null;
  const end = at + m[0].length;
  let secretStart = at;
  let secretEnd = end;
  if (m.indices.groups) {
    const secret = m.indices.groups.secret;
    if (secret === undefined) return null;
    [secretStart, secretEnd] = secret;
  }
  const hit = { start: at, end, secretStart, secretEnd };
  return kind.accept(text, hit, text.charCodeAt(end)) ? hit : null;
}
