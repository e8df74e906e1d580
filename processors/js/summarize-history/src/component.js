// The component's entry: exports the processor through the WIT interface and
// hands the SDK the host's imports and its services (contract 0.2.0: build
// with --backend spidermonkey). The build bundles this file, the processor
// and the SDK into one module.
import * as host from "agent-host:history/host@0.2.0";
import * as services from "agent-host:history/services@0.2.0";
import { exportProcessor } from "agent-host-guest";
import summarizeHistory from "./processor.js";

export const processor = exportProcessor(summarizeHistory, host, services);
