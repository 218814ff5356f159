import { vMinMemoryLimit } from "../../../src/pipeline/schedule/v_min.ts";
import { vCappedTests } from "./_v_capped.ts";

vCappedTests("v-min", vMinMemoryLimit, 4);
