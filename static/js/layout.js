// What never changes during a run, worked out once per trace: the sizes, who waits on which
// barrier, and the timeline's data (each barrier's parity over every step, waits, completions,
// diagnostics), read from the trace's events. Nothing here simulates: it only reads.

export const TILE_COLOURS = 8;

export function tileClass(tile) {
  return tile === null || tile === undefined ? "empty" : `tile-${tile % TILE_COLOURS}`;
}

const ROLE_TEXT = {
  producer: "producer warp", consumer: "consumer warp", thread: "one thread",
  mma: "MMA issuer", epilogue: "epilogue warp", writer: "writer threads",
};

export function roleText(role) { return ROLE_TEXT[role] || role; }

/** The run's fixed facts, from the trace (or session) layout. */
export function makeLayout(layout, scenario) {
  const stageCount = Math.max(1, layout.stages.length);
  const chunks = layout.stages.length ? layout.stages[0].chunks : 0;
  const chunkBytes = layout.stages.length ? layout.stages[0].chunk_bytes : 0;
  const params = (scenario && scenario.params) || {};
  return {
    raw: layout,
    scenario,
    barriers: layout.barriers,
    stages: layout.stages,
    agents: layout.agents,
    stageCount,
    chunks,
    chunkBytes,
    tileBytes: params.tile_bytes || chunks * chunkBytes,
    hasTensorCore: layout.agents.some((a) => a.role === "mma"),
    hasBulkStores: layout.agents.some((a) => a.program.some((line) => line.includes("bulk_group"))),
    key: JSON.stringify(layout),
  };
}

/** The timeline of a trace document (steps with or without snapshots). `times` (GPU traces)
 *  puts each step at its `time_ns` instead of at its number. */
export function timelineOf(doc) {
  const rows = doc.initial.barriers.map((b) => ({
    name: b.name, parity: b.parity, valid: b.valid, initAt: b.valid ? 0 : null,
    changes: [], completions: [], waits: [],
  }));
  const byName = Object.fromEntries(rows.map((row) => [row.name, row]));
  const hasTimes = doc.steps.length > 0 && doc.steps.every((s) => typeof s.time_ns === "number");
  const times = hasTimes ? [doc.steps[0].time_ns, ...doc.steps.map((s) => s.time_ns)] : null;
  for (const step of doc.steps) {
    for (const event of step.events) {
      const row = byName[event.barrier];
      if (!row) continue;
      if (event.kind === "init") row.initAt = step.step;
      else if (event.kind === "phase_completed") {
        row.changes.push([step.step, event.parity]);
        row.completions.push(step.step);
      } else if (event.kind === "wait_returned") row.waits.push([step.step, step.agent]);
    }
  }
  const last = doc.steps.length ? doc.steps[doc.steps.length - 1].step : 0;
  return {
    rows,
    total: Math.max(doc.total_steps, last),
    shown: last,
    times,
    diagnostics: doc.diagnostics,
  };
}
