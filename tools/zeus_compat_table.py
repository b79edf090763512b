"""The hand-written half of the Zeus compatibility table: what cannot work here, and notes.

Keys are full Zeus names or module prefixes (``zeus.optimizer.batch_size.server`` covers every
name below it). ``tools/zeus_compat.py`` checks every other recorded name by importing it.
"""

# Not provided at all: these are the internals of Zeus's HTTP servers and their database, which a
# user's training script never imports.
UNSUPPORTED: dict[str, str] = {
    "zeus.optimizer.batch_size.server": (
        "internals of Zeus's batch-size optimizer server (FastAPI app, SQLAlchemy models, "
        "services); zeus-nb has no server: the client reads and writes the store itself "
        "(sqlite:/// or postgresql:// as server_url)"
    ),
    "zeus.optimizer.batch_size.migrations": (
        "Alembic migrations of Zeus's server database; zeus-nb's store creates and versions its "
        "own tables"
    ),
    "zeus.optimizer.pipeline_frequency.server": (
        "internals of Zeus's PFO server (FastAPI app, job manager, schedulers); zeus-nb plans "
        "in process, and server_url names the schedule file the server's PointSolution would "
        "serve"
    ),
}

# Importable, but constructing or calling them raises our one-line error with the reason.
PLACEHOLDERS: dict[str, str] = {}

_BSO = "zeus.optimizer.batch_size"
_PFO = "zeus.optimizer.pipeline_frequency"

NOTES: dict[str, str] = {
    f"{_BSO}.client.BatchSizeOptimizer": (
        "server_url is the store (sqlite:///PATH, a path, postgresql://...; None: "
        "$ZEUS_SERVER_URL); http(s):// is refused. job_id=None makes a new job per run, as "
        "Zeus's server does; trials are numbered per job in the store. See "
        "batch_size_optimizer.md."
    ),
    f"{_BSO}.common.JobSpec": (
        "A checked dataclass with pydantic-v1 methods (dict, json, parse_obj). "
        "mab_prior_mean, mab_prior_precision and mab_num_explorations are accepted, but "
        "zeus-nb's bandit uses its own prior; beta_knob must be > 1 or None."
    ),
    f"{_BSO}.common.REGISTER_JOB_URL": "Zeus's server route; nothing listens on it here.",
    f"{_BSO}.exceptions.ZeusBSORuntimError": "Every ZeusBSO*Error is also a ZeusNbError.",
    f"{_PFO}.optimizer.PipelineFrequencyOptimizer": (
        "server_url names a schedule file (the planner's freqs_pipeline_NNNNN.py or a zeus-nb "
        "plan JSON, as a path or file://); torch.distributed is optional; zeus-nb's own call "
        "(plan, stage, gpu) works too. See pipeline_frequency.md."
    ),
    f"{_PFO}.frequency_controller.FrequencyController": (
        "Sets clocks in the calling process through zeus-nb's device layer (a settings guard "
        "restores them), not in a child process."
    ),
    f"{_PFO}.common.PFOServerSettings": "No server reads it; fields default to $ZEUS_PFO_*.",
    f"{_PFO}.common.InstructionProfilingResult": (
        "Its CSV has no blocking rows: load_profile(path, p2p_power=W) plans with it."
    ),
}
