// `{{name}}`: drops the tool results that report an error, and takes the
// calls they answer out of their assistant message (the whole message when
// nothing else is left in it), so the history stays a valid one.
//
// Configuration: `{"keep_errors": true}` keeps them (default: false).

import { config, defineProcessor, info, plural } from "agent-host-guest";

export default defineProcessor({
  name: "{{name}}",
  version: "0.1.0",
  summary: "Drops tool results that report an error, and the calls they answer",
  // Every key optional; a misspelt key is refused with its name.
  config: config.object({
    keep_errors: config.boolean(false),
  }),
  configExample: '{"keep_errors": false}',

  process(history, { keep_errors }) {
    if (keep_errors) return;
    const before = history.kept();
    history.retain((m) => !(m.role === "tool" && m.flags.error));
    history.settleToolExchanges();
    const dropped = before - history.kept();
    info(`dropped ${dropped} ${plural(dropped, "message")}`);
  },
});
