// The component's entry: exports the processor through the WIT interface and
// hands the SDK the host's imports. The build bundles this file, the
// processor and the SDK into one module.
import * as host from "agent-host:history/host@0.1.0";
import { exportProcessor } from "agent-host-guest";
import redactSecrets from "./processor.js";

export const processor = exportProcessor(redactSecrets, host);
