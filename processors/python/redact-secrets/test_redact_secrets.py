"""Native tests of the Python redact-secrets: `python3 -m unittest` in this
folder. The cases follow the Rust processor's tests; the integration test
`lang_python` then compares the built component with the Rust one over the
corpus."""

import json
import pathlib
import sys
import unittest

# The processor's sources, and the SDK from this checkout.
HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "src"), str(HERE.parents[2] / "guest-sdk" / "python")]

from agent_host_guest import (  # noqa: E402
    BadConfig,
    History,
    Reasoning,
    Role,
    TextPart,
    ToolCall,
    message,
    parse_config,
    testing,
    texts,
    tool_result,
)
from agent_host_guest import host  # noqa: E402

from redact_secrets import Config, RedactSecrets, Redactor, summary  # noqa: E402
from redact_secrets.redactor import literal_prefix  # noqa: E402

host.echo = False

# Fake secrets, built from pieces so that no secret scanner mistakes this file
# for a leak.
OPENAI = "".join(["sk-", "proj-", "Xy7kP2" * 8, "_Qz9-Lm"])
OPENAI_LEGACY = "".join(["sk-", "aB3dE5" * 8])
ANTHROPIC = "".join(["sk-", "ant-", "api03-", "Ab9_c-D" * 13, "AA"])
AWS_ID = "".join(["AKIA", "IOSFODNN7", "EXAMPLE"])
AWS_SECRET = "".join(["wJalrXUtnFEMI", "/K7MDENG/bPxRfiCY", "EXAMPLEKEY"])
GITHUB = "".join(["ghp_", "A1b2C3d4E5" * 3, "f6G7h8"])
GITHUB_PAT = "".join(["github_", "pat_", "11ABCDEFG0", "abcdefghijkl_", "Zz09" * 14])
SLACK = "".join(["xoxb", "-123456789012", "-1234567890123-", "AbCdEfGhIjKlMnOpQrStUvWx"])
WEBHOOK_PATH = "".join(["T0A1B2C3D", "/B0A1B2C3D/", "XyZ123abcDEF456ghiJKL789"])
JWT = "".join(["eyJhbGciOiJIUzI1NiJ9", ".eyJzdWIiOiIxMjM0In0", ".Sf1Kx-9aB_cD"])


def pem(label: str, newline: str) -> str:
    body = "".join(["MIIEow", "IBAAKCAQEA7", "xYzAbC+/dEf=="])
    begin, end = "-----BEGIN ", "-----END "
    return (
        f"{begin}{label}PRIVATE KEY-----{newline}{body}{newline}{body}{newline}"
        f"{end}{label}PRIVATE KEY-----"
    )


def redactor(config: str = "{}") -> Redactor:
    return Redactor(parse_config(config, Config))


def redact(r: Redactor, text: str) -> str:
    out = r.redact(text)
    return text if out is None else out


def kinds(r: Redactor, text: str) -> list:
    return [kind for kind, _, _ in r.matches(text)]


class Kinds(unittest.TestCase):
    def test_each_kind_is_replaced_by_its_placeholder(self):
        r = redactor('{"emails": true}')
        cases = [
            (f"key: {OPENAI}", "key: [REDACTED:openai-key]"),
            (f"OPENAI_API_KEY={OPENAI_LEGACY}\n", "OPENAI_API_KEY=[REDACTED:openai-key]\n"),
            (f'"{ANTHROPIC}"', '"[REDACTED:anthropic-key]"'),
            (f"id {AWS_ID} ok", "id [REDACTED:aws-access-key] ok"),
            (
                f"aws_secret_access_key = {AWS_SECRET}",
                "aws_secret_access_key = [REDACTED:aws-secret-key]",
            ),
            (f"token {GITHUB}.", "token [REDACTED:github-token]."),
            (GITHUB_PAT, "[REDACTED:github-token]"),
            (f"SLACK={SLACK}", "SLACK=[REDACTED:slack-token]"),
            (
                f"https://hooks.slack.com/services/{WEBHOOK_PATH}",
                "https://hooks.slack.com/services/[REDACTED:slack-webhook]",
            ),
            (f"Authorization: Bearer {JWT}", "Authorization: Bearer [REDACTED:bearer-token]"),
            ("postgres://app:hunter2@db/app", "postgres://app:[REDACTED:url-password]@db/app"),
            ("mail ops@example.com now", "mail [REDACTED:email] now"),
        ]
        for text, want in cases:
            self.assertEqual(redact(r, text), want, text)

    def test_lookalikes_are_left_alone(self):
        r = redactor()
        for text in [
            "task-sk-list and sk-learn, risk-assessment-for-the-year-2024",
            "sk-spinner-container-wrapper-2024 is a CSS class",
            "sk-abcdefghijklmnopqrstuvwxyz0123456789 (no uppercase: not a key)",
            "AKIAIOSFODNN7EXAMPLE2 is too long, xAKIAIOSFODNN7EXAMPLE is glued",
            "the bearer of bad news; a Bearer token; Bearer YOUR_API_KEY_HERE; Bearer ${TOKEN}",
            "xoxb-your-token-here and xapp-placeholder",
            "ghp_short and gh_pages_deploy_branch_name_is_long_enough",
            "http://localhost:8080/path and https://example.com:443/a@b",
            "postgres://app:${DB_PASSWORD}@db/app and redis://:{password}@cache",
            "the file begins with `-----BEGIN RSA PRIVATE KEY-----` as usual",
            "aws_secret_access_key = <your secret here>",
            "",
            "ünïcödé ☃ text without secrets: 東京",
        ]:
            self.assertEqual(r.matches(text), [], text)
            self.assertIsNone(r.redact(text), text)

    def test_case_folding_is_ascii_only(self):
        # Python's Unicode case folding takes `ſ` (long s) for `s` and the
        # Kelvin sign for `k`; Rust's regex-lite does not, nor may we.
        r = redactor()
        text = f"\u017fecret_access_key = {AWS_SECRET} and bearer\u212a {JWT}"
        self.assertIsNone(r.redact(text))
        # Extra patterns too: `(?i)` folds ASCII only, `\d` and `\w` are ASCII.
        r = redactor(r'{"kinds": ["openai-key"], "extra": [{"name": "s", "pattern": "(?i)secret"}, {"name": "d", "pattern": "\\d{4}"}]}')
        self.assertIsNone(r.redact("\u017fecret \u0661\u0662\u0663\u0664"))
        self.assertEqual(redact(r, "SECRET 1234"), "[REDACTED:s] [REDACTED:d]")

    def test_anthropic_keys_are_not_typed_as_openai_keys(self):
        text = f"a {ANTHROPIC} b {OPENAI}"
        self.assertEqual(kinds(redactor(), text), ["anthropic-key", "openai-key"])
        self.assertEqual(kinds(redactor('{"kinds": ["openai-key"]}'), text), ["openai-key"])

    def test_url_passwords_keep_the_user_and_host(self):
        r = redactor()
        for text, want in [
            ("mysql://root:pa:ss@localhost/db", "mysql://root:[REDACTED:url-password]@localhost/db"),
            ("https://me:p@ss@w0rd@example.com/x", "https://me:[REDACTED:url-password]@example.com/x"),
            ("redis://:hunter2@[::1]:6379", "redis://:[REDACTED:url-password]@[::1]:6379"),
            ("smb://ü:pässwörd@höst/x", "smb://ü:[REDACTED:url-password]@höst/x"),
        ]:
            self.assertEqual(redact(r, text), want)

    def test_private_key_blocks_are_replaced_whole(self):
        r = redactor()
        for label in ["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "]:
            text = f"cat id:\n{pem(label, chr(10))}\n$ "
            self.assertEqual(redact(r, text), "cat id:\n[REDACTED:private-key]\n$ ", label)
        self.assertEqual(redact(r, pem("", "\r\n") + "\r\n"), "[REDACTED:private-key]\r\n")
        escaped = json.dumps({"content": pem("RSA ", "\n") + "\n"})
        self.assertEqual(redact(r, escaped), '{"content": "[REDACTED:private-key]\\n"}')
        full = pem("RSA ", "\n")
        cut = full[: full.index("-----END")]
        self.assertEqual(redact(r, cut + "... (truncated)"), "[REDACTED:private-key]... (truncated)")
        self.assertEqual(redact(r, f"KEY='{pem('', ' ')}'"), "KEY='[REDACTED:private-key]'")
        begin, end = "-----BEGIN OPENSSH", "-----END OPENSSH"
        prose = f"It starts with {begin} PRIVATE KEY----- and ends with {end} PRIVATE KEY-----."
        self.assertIsNone(r.redact(prose))

    def test_bearer_keeps_the_word_and_defers_to_specific_kinds(self):
        r = redactor()
        self.assertEqual(redact(r, f"bearer\t{JWT}"), "bearer\t[REDACTED:bearer-token]")
        self.assertEqual(
            redact(r, f"Authorization: Bearer {OPENAI}"), "Authorization: Bearer [REDACTED:openai-key]"
        )
        only = redactor('{"kinds": ["bearer-token"]}')
        self.assertEqual(redact(only, f"Bearer {OPENAI}"), "Bearer [REDACTED:bearer-token]")

    def test_labelled_aws_secrets(self):
        r = redactor()
        for label, sep in [
            ("aws_secret_access_key", " = "),
            ("AWS_SECRET_ACCESS_KEY", "="),
            ('"SecretAccessKey"', ': "'),
            ('\\"SecretAccessKey\\"', ': \\"'),
            ("'aws_secret_access_key'", " => '"),
        ]:
            self.assertEqual(
                redact(r, f'{label}{sep}{AWS_SECRET}"'), f'{label}{sep}[REDACTED:aws-secret-key]"'
            )
        self.assertIsNone(r.redact(f"value {AWS_SECRET}"))

    def test_emails_only_when_asked(self):
        text = "write to ops@example.com"
        self.assertIsNone(redactor().redact(text))
        self.assertEqual(redact(redactor('{"kinds": ["email"]}'), text), "write to [REDACTED:email]")
        self.assertEqual(
            redact(redactor('{"emails": true}'), "ftp://bob:pw12@files.example.com and bob@example.com"),
            "ftp://bob:[REDACTED:url-password]@files.example.com and [REDACTED:email]",
        )

    def test_extra_patterns_run_after_the_built_in_kinds(self):
        r = redactor(
            '{"extra": [{"name": "acme-token", "pattern": "acme_[a-z0-9]{8,}"},'
            ' {"name": "pin", "pattern": "PIN:? *(?P<secret>[0-9]{4,6})\\\\b"},'
            ' {"name": "everything-sk", "pattern": "sk-\\\\S+"}]}'
        )
        self.assertEqual(
            redact(r, "use acme_0123abcd9 with PIN 12345 and é acme_zzzzzzzz"),
            "use [REDACTED:acme-token] with PIN [REDACTED:pin] and é [REDACTED:acme-token]",
        )
        self.assertEqual(kinds(r, OPENAI), ["openai-key"])
        self.assertEqual(kinds(r, "sk-x"), ["everything-sk"])

    def test_literal_prefixes(self):
        for pattern, want in [
            ("acme_[a-z0-9]{32}", "acme_"),
            (r"\bsk_live_[0-9a-zA-Z]{24}", "sk_live_"),
            ("tok-?[0-9]+", "tok"),
            ("abc{2}", "ab"),
            ("a*b", None),
            ("acme_x|other", None),
            ("(?i)acme", None),
            (r"\d{4}", None),
            ("PIN:? *", "PIN"),
        ]:
            self.assertEqual(literal_prefix(pattern), want, pattern)

    def test_bad_configurations_say_what_is_wrong(self):
        def error(config: str) -> str:
            with self.assertRaises(BadConfig) as e:
                redactor(config)
            return e.exception.message

        m = error('{"kinds": ["openai-key", "passwords"]}')
        self.assertIn('unknown kind "passwords"', m)
        self.assertIn("private-key, anthropic-key, openai-key", m)
        m = error('{"extra": [{"name": "acme", "pattern": "acme_[a-z"}]}')
        self.assertIn('extra pattern "acme" is not a valid regex', m)
        self.assertIn("matches the empty string", error('{"extra": [{"name": "o", "pattern": "x*"}]}'))
        self.assertIn("already taken", error('{"extra": [{"name": "email", "pattern": "x"}]}'))
        self.assertIn("ASCII letters", error('{"extra": [{"name": "a b", "pattern": "x"}]}'))
        self.assertIn("look-around", error('{"extra": [{"name": "a", "pattern": "x(?=y)"}]}'))
        self.assertIn("back-reference", error('{"extra": [{"name": "a", "pattern": "(x)\\\\1"}]}'))
        self.assertIn("nothing to look for", error('{"kinds": []}'))
        self.assertIn("empty", error('{"placeholder": ""}'))
        self.assertIn("would itself be redacted as aws-access-key", error(f'{{"placeholder": "<{AWS_ID}>"}}'))
        self.assertIn("unknown field `email`", error('{"email": true}'))
        self.assertIn("`extra[0]`: missing field `pattern`", error('{"extra": [{"name": "x"}]}'))

    def test_custom_placeholders(self):
        r = redactor('{"placeholder": "<secret {kind}/{kind}>"}')
        self.assertEqual(redact(r, GITHUB), "<secret github-token/github-token>")

    def test_redaction_is_idempotent(self):
        samples = [
            OPENAI, ANTHROPIC, AWS_ID, f"aws_secret_access_key={AWS_SECRET}", GITHUB, GITHUB_PAT,
            SLACK, f"https://hooks.slack.com/services/{WEBHOOK_PATH}", f"Bearer {JWT}",
            pem("RSA ", "\n"), "postgres://u:pw@db", "a.b@example.org", "plain words",
        ]  # fmt: skip
        for placeholder in ["[REDACTED:{kind}]", "[REDACTED]", "***", "<{kind}>"]:
            r = redactor(json.dumps({"emails": True, "placeholder": placeholder}))
            for a in samples:
                for b in samples:
                    for sep in ["", " ", "\n", "-", "_", "/", "@", ":", "x"]:
                        once = redact(r, a + sep + b)
                        self.assertIsNone(r.redact(once), f"{placeholder}: {a + sep + b!r} gave {once!r}")

    def test_a_token_right_after_a_replacement_is_judged_by_the_placeholder(self):
        self.assertEqual(
            redact(redactor(), pem("", "\n") + GITHUB), "[REDACTED:private-key][REDACTED:github-token]"
        )

    def test_multibyte_text_around_secrets(self):
        r = redactor('{"emails": true, "extra": [{"name": "x", "pattern": "é+"}]}')
        self.assertEqual(
            redact(r, f"→{GITHUB}← ünï@exämple.com é"),
            "→[REDACTED:github-token]← ünï@exämple.com [REDACTED:x]",
        )


def sample_history() -> list:
    thinking = message(Role.ASSISTANT, "Let me check the config.")
    thinking.reasoning = Reasoning(f"The user pasted {OPENAI} by mistake.", "sig", False)
    thinking.tool_calls.append(
        ToolCall("c1", "http_get", json.dumps({"headers": {"Authorization": f"Bearer {JWT}"}}))
    )
    opaque = message(Role.ASSISTANT, "Done.")
    opaque.reasoning = Reasoning(f"opaque {GITHUB}", None, True)
    parts = message(Role.USER, "", parts=[TextPart("first part"), TextPart(f"second: {GITHUB}")])
    return [
        message(Role.SYSTEM, "You are helpful."),
        message(Role.USER, f"my key is {OPENAI} and my ssh key:\n{pem('', chr(10))}"),
        thinking,
        tool_result("c1", "200 OK"),
        opaque,
        parts,
    ]


class Processor(unittest.TestCase):
    def test_only_messages_with_secrets_are_replaced(self):
        h = testing.run_history(RedactSecrets, "{}", sample_history())
        self.assertEqual([i for i in range(len(h)) if h.is_changed(i)], [1, 2, 5])
        m = h.messages
        self.assertEqual(
            m[1].content, "my key is [REDACTED:openai-key] and my ssh key:\n[REDACTED:private-key]"
        )
        self.assertIsNone(m[2].reasoning, "signed reasoning with a secret goes")
        self.assertIn('"Bearer [REDACTED:bearer-token]"', m[2].tool_calls[0].arguments)
        self.assertTrue(m[4].reasoning.text.startswith("opaque ghp_"))
        self.assertEqual(texts(m[5]), ["", "first part", "second: [REDACTED:github-token]"])
        self.assertEqual(
            testing.logs(),
            [
                "redacted 5 secrets in 3 messages: private-key 1, openai-key 2, github-token 1, bearer-token 1",
                "dropped the signed reasoning of 1 message: it held a secret and a signed block cannot be edited",
            ],
        )

    def test_a_second_run_changes_nothing(self):
        once = testing.run(RedactSecrets, "{}", sample_history())
        h = History.for_test(once)
        RedactSecrets().process(h, Config())
        self.assertFalse(any(h.is_changed(i) for i in range(len(h))))

    def test_the_log_line(self):
        r = redactor()
        self.assertEqual(summary(r, [0] * r.kind_count(), 0, 1), "no secrets found in 1 message")
        one = [1] + [0] * (r.kind_count() - 1)
        self.assertEqual(summary(r, one, 1, 9), "redacted 1 secret in 1 message: private-key 1")

    def test_the_example_configuration_works(self):
        Redactor(parse_config(RedactSecrets.config_example, Config))
        schema = json.loads(RedactSecrets.config_schema)
        names = schema["properties"]["kinds"]["items"]["enum"]
        from redact_secrets.kinds import BUILTINS

        self.assertEqual(names, [k.name for k in BUILTINS])


if __name__ == "__main__":
    unittest.main()
