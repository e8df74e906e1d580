// The processor under Node, with the SDK's local stand-in for the host: the
// Rust processor's unit cases, which this port must pass unchanged. The
// integration test `lang_js` then compares the built component with the Rust
// component over the corpus.

import assert from "node:assert/strict";
import { test } from "node:test";

import { ProcessorError, message, parseConfig, testing, texts, toolResult } from "agent-host-guest";
import redactSecrets, { summary } from "../src/processor.js";
import { Redactor, literalPrefix } from "../src/redactor.js";

// Fake secrets, built from pieces so that no secret scanner mistakes this
// file for a leak (the same as the Rust tests').
const openai = () => ["sk-", "proj-", "Xy7kP2".repeat(8), "_Qz9-Lm"].join("");
const openaiLegacy = () => ["sk-", "aB3dE5".repeat(8)].join("");
const anthropic = () => ["sk-", "ant-", "api03-", "Ab9_c-D".repeat(13), "AA"].join("");
const awsId = () => ["AKIA", "IOSFODNN7", "EXAMPLE"].join("");
const awsSecret = () => ["wJalrXUtnFEMI", "/K7MDENG/bPxRfiCY", "EXAMPLEKEY"].join("");
const github = () => ["ghp_", "A1b2C3d4E5".repeat(3), "f6G7h8"].join("");
const githubPat = () => ["github_", "pat_", "11ABCDEFG0", "abcdefghijkl_", "Zz09".repeat(14)].join("");
const slack = () => ["xoxb", "-123456789012", "-1234567890123-", "AbCdEfGhIjKlMnOpQrStUvWx"].join("");
const webhookPath = () => ["T0A1B2C3D", "/B0A1B2C3D/", "XyZ123abcDEF456ghiJKL789"].join("");
const jwt = () => ["eyJhbGciOiJIUzI1NiJ9", ".eyJzdWIiOiIxMjM0In0", ".Sf1Kx-9aB_cD"].join("");
function pem(label, newline) {
  const body = ["MIIEow", "IBAAKCAQEA7", "xYzAbC+/dEf=="].join("");
  const [begin, end] = ["-----BEGIN ", "-----END "];
  return `${begin}${label}PRIVATE KEY-----${newline}${body}${newline}${body}${newline}${end}${label}PRIVATE KEY-----`;
}

/** A redactor for the configuration `json`. */
const withConfig = (json) => new Redactor(parseConfig(json, redactSecrets.config));
const redact = (r, text) => r.redact(text) ?? text;
const kinds = (r, text) => r.matches(text).map((m) => m.kind);

test("each kind is replaced by its placeholder", () => {
  const r = withConfig('{"emails": true}');
  const cases = [
    [`key: ${openai()}`, "key: [REDACTED:openai-key]"],
    [`OPENAI_API_KEY=${openaiLegacy()}\n`, "OPENAI_API_KEY=[REDACTED:openai-key]\n"],
    [`"${anthropic()}"`, '"[REDACTED:anthropic-key]"'],
    [`id ${awsId()} ok`, "id [REDACTED:aws-access-key] ok"],
    [`aws_secret_access_key = ${awsSecret()}`, "aws_secret_access_key = [REDACTED:aws-secret-key]"],
    [`token=${github()}`, "token=[REDACTED:github-token]"],
    [`(${githubPat()})`, "([REDACTED:github-token])"],
    [`SLACK=${slack()}`, "SLACK=[REDACTED:slack-token]"],
    [
      `post to https://hooks.slack.com/services/${webhookPath()} now`,
      "post to https://hooks.slack.com/services/[REDACTED:slack-webhook] now",
    ],
    [`Authorization: Bearer ${jwt()}`, "Authorization: Bearer [REDACTED:bearer-token]"],
    [`key:\n${pem("RSA ", "\n")}\ndone`, "key:\n[REDACTED:private-key]\ndone"],
    [
      "DATABASE_URL=postgres://app:s3cr3t-Pw@db.internal:5432/app",
      "DATABASE_URL=postgres://app:[REDACTED:url-password]@db.internal:5432/app",
    ],
    ["mail jane.doe+x@example.co.uk.", "mail [REDACTED:email]."],
  ];
  for (const [text, want] of cases) assert.equal(redact(r, text), want, text);
});

test("ordinary text is left alone", () => {
  const r = withConfig("{}");
  const plain = [
    "task-sk-list and sk-learn, risk-assessment-for-the-year-2024",
    "sk-spinner-container-wrapper-2024 is a CSS class",
    "sk-abcdefghijklmnopqrstuvwxyz0123456789 (no uppercase: not a key)",
    "id 123e4567-e89b-12d3-a456-426614174000 at commit 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
    "AKIAIOSFODNN7EXAMPLE2 is too long, xAKIAIOSFODNN7EXAMPLE is glued",
    "the bearer of bad news; a Bearer token; Bearer YOUR_API_KEY_HERE; Bearer ${TOKEN}",
    "Bearer <token> and bearer: abc",
    "xoxb-your-token-here and xapp-placeholder",
    "ghp_short and gh_pages_deploy_branch_name_is_long_enough",
    "http://localhost:8080/path and https://example.com:443/a@b",
    "ssh://git@github.com/org/repo.git and git@github.com:org/repo",
    "postgres://app:${DB_PASSWORD}@db/app and redis://:{password}@cache",
    "https://user@host.example/path, mailto:someone",
    "the file begins with `-----BEGIN RSA PRIVATE KEY-----` as usual",
    "aws_secret_access_key = <your secret here>",
    "SecretAccessKey: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY01 (41 characters)",
    "base64: TWFueSBoYW5kcyBtYWtlIGxpZ2h0IHdvcmsu/+==",
    "",
    "ünïcödé ☃ text without secrets: 東京",
  ];
  for (const text of plain) {
    assert.deepEqual(r.matches(text), [], text);
    assert.equal(r.redact(text), null, text);
  }
  const emails = withConfig('{"emails": true}');
  assert.deepEqual(emails.matches("user@localhost, @types/node, pkg@1.2.3, @@, a@b.c, x@-"), []);
});

test("anthropic keys are not typed as openai keys", () => {
  const text = `a ${anthropic()} b ${openai()}`;
  assert.deepEqual(kinds(withConfig("{}"), text), ["anthropic-key", "openai-key"]);
  assert.deepEqual(kinds(withConfig('{"kinds": ["openai-key"]}'), text), ["openai-key"]);
});

test("url passwords keep the user and host", () => {
  const r = withConfig("{}");
  assert.equal(redact(r, "mysql://root:pa:ss@localhost/db"), "mysql://root:[REDACTED:url-password]@localhost/db");
  assert.equal(redact(r, "https://me:p@ss@w0rd@example.com/x"), "https://me:[REDACTED:url-password]@example.com/x");
  assert.equal(redact(r, "redis://:hunter2@[::1]:6379"), "redis://:[REDACTED:url-password]@[::1]:6379");
});

test("private key blocks are replaced whole", () => {
  const r = withConfig("{}");
  for (const label of ["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "]) {
    assert.equal(redact(r, `cat id:\n${pem(label, "\n")}\n$ `), "cat id:\n[REDACTED:private-key]\n$ ", label);
  }
  assert.equal(redact(r, `${pem("", "\r\n")}\r\n`), "[REDACTED:private-key]\r\n");
  assert.equal(redact(r, `{"content": "${pem("RSA ", "\\n")}\\n"}`), '{"content": "[REDACTED:private-key]\\n"}');
  const full = pem("RSA ", "\n");
  const cut = full.slice(0, full.indexOf("-----END"));
  assert.equal(redact(r, `${cut}... (truncated)`), "[REDACTED:private-key]... (truncated)");
  assert.equal(redact(r, `KEY='${pem("", " ")}'`), "KEY='[REDACTED:private-key]'");
  const prose = "It starts with -----BEGIN OPENSSH PRIVATE KEY----- and ends with -----END OPENSSH PRIVATE KEY-----.";
  assert.equal(r.redact(prose), null);
});

test("bearer keeps the word and defers to specific kinds", () => {
  const r = withConfig("{}");
  assert.equal(redact(r, `bearer\t${jwt()}`), "bearer\t[REDACTED:bearer-token]");
  assert.equal(redact(r, `Authorization: Bearer ${openai()}`), "Authorization: Bearer [REDACTED:openai-key]");
  assert.equal(redact(r, `Bearer ${github()}`), "Bearer [REDACTED:github-token]");
  const bearerOnly = withConfig('{"kinds": ["bearer-token"]}');
  assert.equal(redact(bearerOnly, `Bearer ${openai()}`), "Bearer [REDACTED:bearer-token]");
});

test("labelled aws secrets in their usual shapes", () => {
  const r = withConfig("{}");
  const s = awsSecret();
  for (const [label, sep] of [
    ["aws_secret_access_key", " = "],
    ["AWS_SECRET_ACCESS_KEY", "="],
    ['"SecretAccessKey"', ': "'],
    ['\\"SecretAccessKey\\"', ': \\"'],
    ["'aws_secret_access_key'", " => '"],
  ]) {
    assert.equal(redact(r, `${label}${sep}${s}"`), `${label}${sep}[REDACTED:aws-secret-key]"`);
  }
  assert.equal(r.redact(`value ${s}`), null);
});

test("extra patterns run after the built-in kinds", () => {
  const r = withConfig(`{"extra": [
    {"name": "acme-token", "pattern": "acme_[a-z0-9]{8,}"},
    {"name": "pin", "pattern": "PIN:? *(?P<secret>[0-9]{4,6})\\\\b"},
    {"name": "everything-sk", "pattern": "sk-\\\\S+"}
  ]}`);
  assert.equal(
    redact(r, "use acme_0123abcd9 with PIN 12345 and é acme_zzzzzzzz"),
    "use [REDACTED:acme-token] with PIN [REDACTED:pin] and é [REDACTED:acme-token]",
  );
  assert.deepEqual(kinds(r, openai()), ["openai-key"]);
  assert.deepEqual(kinds(r, "sk-x"), ["everything-sk"]);
});

test("literal prefixes are only taken when every match has them", () => {
  const cases = [
    ["acme_[a-z0-9]{32}", "acme_"],
    ["\\bsk_live_[0-9a-zA-Z]{24}", "sk_live_"],
    ["tok-?[0-9]+", "tok"],
    ["abc{2}", "ab"],
    ["a*b", null],
    ["acme_x|other", null],
    ["(?i)acme", null],
    ["\\d{4}", null],
    ["PIN:? *", "PIN"],
  ];
  for (const [pattern, want] of cases) assert.equal(literalPrefix(pattern), want, pattern);
});

test("bad configurations say what is wrong", () => {
  const err = (json) => {
    try {
      withConfig(json);
    } catch (e) {
      assert.ok(e instanceof ProcessorError && e.kind === "bad-config", String(e));
      return e.message;
    }
    assert.fail(`${json} was accepted`);
  };
  let m = err('{"kinds": ["openai-key", "passwords"]}');
  assert.match(m, /unknown kind "passwords"/);
  assert.match(m, /private-key, anthropic-key, openai-key/);
  m = err('{"extra": [{"name": "acme", "pattern": "acme_[a-z"}]}');
  assert.match(m, /extra pattern "acme" is not a valid regex/);
  assert.match(err('{"extra": [{"name": "opt", "pattern": "x*"}]}'), /matches the empty string/);
  assert.match(err('{"extra": [{"name": "email", "pattern": "x"}]}'), /already taken/);
  assert.match(err('{"extra": [{"name": "a b", "pattern": "x"}]}'), /ASCII letters/);
  assert.match(err('{"kinds": []}'), /nothing to look for/);
  assert.match(err('{"placeholder": ""}'), /empty/);
  assert.match(err(`{"placeholder": "<${awsId()}>"}`), /would itself be redacted as aws-access-key/);
  assert.match(err('{"email": true}'), /unknown field `email`/);
  assert.match(err('{"extra": [{"name": "x"}]}'), /missing field `pattern`/);
  assert.match(err('{"emails": "yes"}'), /^`emails`: expected a boolean/);
  assert.match(err('{"extra": [{"name": "x", "pattern": 7}]}'), /^`extra\[0\]\.pattern`: expected a string/);
});

test("redaction is idempotent", () => {
  const samples = [
    openai(),
    anthropic(),
    awsId(),
    `aws_secret_access_key=${awsSecret()}`,
    github(),
    githubPat(),
    slack(),
    `https://hooks.slack.com/services/${webhookPath()}`,
    `Bearer ${jwt()}`,
    pem("RSA ", "\n"),
    "postgres://u:pw@db",
    "a.b@example.org",
    "plain words",
  ];
  for (const placeholder of ["[REDACTED:{kind}]", "[REDACTED]", "***", "<{kind}>"]) {
    const r = withConfig(JSON.stringify({ emails: true, placeholder }));
    for (const a of samples) {
      for (const b of samples) {
        for (const sep of ["", " ", "\n", "-", "_", "/", "@", ":", "x"]) {
          const once = redact(r, `${a}${sep}${b}`);
          assert.equal(r.redact(once), null, `${placeholder}: ${a}${sep}${b} gave ${once}`);
        }
      }
    }
  }
});

test("a token right after a replacement is judged by the placeholder", () => {
  assert.equal(
    redact(withConfig("{}"), `${pem("", "\n")}${github()}`),
    "[REDACTED:private-key][REDACTED:github-token]",
  );
});

test("text outside the Basic Multilingual Plane around secrets", () => {
  const r = withConfig('{"emails": true, "extra": [{"name": "x", "pattern": "é+"}, {"name": "y", "pattern": "😀+z"}]}');
  assert.equal(
    redact(r, `→${github()}← ünï@exämple.com é 😀😀z 𝔘 a@b.cd`),
    "→[REDACTED:github-token]← ünï@exämple.com [REDACTED:x] [REDACTED:y] 𝔘 [REDACTED:email]",
  );
});

test("texts whose lowercase has another length are scanned as they are", () => {
  // "İ".toLowerCase() is two code units: the candidates come from the text.
  const r = withConfig("{}");
  assert.equal(
    redact(r, `İstanbul: Bearer ${jwt()} and SECRET_ACCESS_KEY=${awsSecret()}`),
    "İstanbul: Bearer [REDACTED:bearer-token] and SECRET_ACCESS_KEY=[REDACTED:aws-secret-key]",
  );
});

test("only messages with secrets are replaced, signed reasoning goes", () => {
  const thinking = message("assistant", "Let me check the config.");
  thinking.reasoning = { text: `The user pasted ${openai()} by mistake.`, signature: "sig", redacted: false };
  thinking.toolCalls.push({
    id: "c1",
    name: "http_get",
    arguments: `{"headers": {"Authorization": "Bearer ${jwt()}"}}`,
  });
  const opaque = message("assistant", "Done.");
  opaque.reasoning = { text: `opaque ${github()}`, signature: null, redacted: true };
  const parts = message("user", "");
  parts.parts.push({ tag: "text", val: "first part, nothing here" }, { tag: "text", val: `second part: ${github()}` });
  const input = [
    message("system", "You are helpful."),
    message("user", `my key is ${openai()} and my ssh key:\n${pem("", "\n")}`),
    thinking,
    toolResult("c1", "200 OK"),
    opaque,
    parts,
  ];
  const out = testing.run(redactSecrets, "{}", input);
  assert.equal(out[1].content, "my key is [REDACTED:openai-key] and my ssh key:\n[REDACTED:private-key]");
  assert.equal(out[2].reasoning, null);
  assert.match(out[2].toolCalls[0].arguments, /"Bearer \[REDACTED:bearer-token\]"/);
  assert.equal(out[4], input[4], "opaque reasoning is never touched");
  assert.deepEqual(texts(out[5]), ["", "first part, nothing here", "second part: [REDACTED:github-token]"]);
  assert.deepEqual(
    testing.logs.map((l) => l.text),
    [
      "redacted 5 secrets in 3 messages: private-key 1, openai-key 2, github-token 1, bearer-token 1",
      "dropped the signed reasoning of 1 message: it held a secret and a signed block cannot be edited",
    ],
  );
  // A second run changes nothing.
  const again = testing.run(redactSecrets, "{}", out);
  assert.deepEqual(again, out);
  assert.deepEqual(testing.logs.map((l) => l.text), ["no secrets found in 6 messages"]);
});

test("the summary line", () => {
  const r = withConfig("{}");
  const none = new Array(r.kindCount()).fill(0);
  assert.equal(summary(r, none, 0, 1), "no secrets found in 1 message");
  const one = none.slice();
  one[0] = 1;
  assert.equal(summary(r, one, 1, 9), "redacted 1 secret in 1 message: private-key 1");
});

test("the example and schema agree with the kinds", () => {
  withConfig(redactSecrets.configExample);
  const schema = JSON.parse(redactSecrets.configSchema);
  assert.equal(schema.properties.kinds.items.enum.length, 11);
});
