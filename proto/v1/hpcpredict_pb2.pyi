from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Value(_message.Message):
    __slots__ = ("number", "text", "flag")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FLAG_FIELD_NUMBER: _ClassVar[int]
    number: float
    text: str
    flag: bool
    def __init__(self, number: _Optional[float] = ..., text: _Optional[str] = ..., flag: bool = ...) -> None: ...

class JobIdentity(_message.Message):
    __slots__ = ("user", "account", "partition", "job_name", "application", "group", "qos", "cluster")
    USER_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    QOS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    user: str
    account: str
    partition: str
    job_name: str
    application: str
    group: str
    qos: str
    cluster: str
    def __init__(self, user: _Optional[str] = ..., account: _Optional[str] = ..., partition: _Optional[str] = ..., job_name: _Optional[str] = ..., application: _Optional[str] = ..., group: _Optional[str] = ..., qos: _Optional[str] = ..., cluster: _Optional[str] = ...) -> None: ...

class Resources(_message.Message):
    __slots__ = ("nodes", "ntasks", "ntasks_per_node", "cpus_per_task", "distribution", "tasks_per_node", "gpus", "mem_mb")
    NODES_FIELD_NUMBER: _ClassVar[int]
    NTASKS_FIELD_NUMBER: _ClassVar[int]
    NTASKS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    CPUS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    DISTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    TASKS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    MEM_MB_FIELD_NUMBER: _ClassVar[int]
    nodes: int
    ntasks: int
    ntasks_per_node: int
    cpus_per_task: int
    distribution: str
    tasks_per_node: str
    gpus: int
    mem_mb: int
    def __init__(self, nodes: _Optional[int] = ..., ntasks: _Optional[int] = ..., ntasks_per_node: _Optional[int] = ..., cpus_per_task: _Optional[int] = ..., distribution: _Optional[str] = ..., tasks_per_node: _Optional[str] = ..., gpus: _Optional[int] = ..., mem_mb: _Optional[int] = ...) -> None: ...

class RankMessage(_message.Message):
    __slots__ = ("src", "dst", "bytes")
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    src: int
    dst: int
    bytes: int
    def __init__(self, src: _Optional[int] = ..., dst: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class CommPattern(_message.Message):
    __slots__ = ("name", "message_bytes", "grid", "peers", "messages", "seed", "phases")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    GRID_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    PHASES_FIELD_NUMBER: _ClassVar[int]
    name: str
    message_bytes: int
    grid: _containers.RepeatedScalarFieldContainer[int]
    peers: int
    messages: _containers.RepeatedCompositeFieldContainer[RankMessage]
    seed: int
    phases: int
    def __init__(self, name: _Optional[str] = ..., message_bytes: _Optional[int] = ..., grid: _Optional[_Iterable[int]] = ..., peers: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[RankMessage, _Mapping]]] = ..., seed: _Optional[int] = ..., phases: _Optional[int] = ...) -> None: ...

class JobRequest(_message.Message):
    __slots__ = ("job", "inputs", "resources", "time_limit_s", "comm", "node_list", "risk", "script", "argv", "environment", "submit_time", "job_id", "script_bytes", "max_time_s", "default_time_s", "time_min_s", "time_limit_unlimited")
    class InputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    COMM_FIELD_NUMBER: _ClassVar[int]
    NODE_LIST_FIELD_NUMBER: _ClassVar[int]
    RISK_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_TIME_S_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TIME_S_FIELD_NUMBER: _ClassVar[int]
    TIME_MIN_S_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_UNLIMITED_FIELD_NUMBER: _ClassVar[int]
    job: JobIdentity
    inputs: _containers.MessageMap[str, Value]
    resources: Resources
    time_limit_s: int
    comm: CommPattern
    node_list: str
    risk: float
    script: bytes
    argv: _containers.RepeatedScalarFieldContainer[str]
    environment: _containers.ScalarMap[str, str]
    submit_time: int
    job_id: str
    script_bytes: int
    max_time_s: int
    default_time_s: int
    time_min_s: int
    time_limit_unlimited: bool
    def __init__(self, job: _Optional[_Union[JobIdentity, _Mapping]] = ..., inputs: _Optional[_Mapping[str, Value]] = ..., resources: _Optional[_Union[Resources, _Mapping]] = ..., time_limit_s: _Optional[int] = ..., comm: _Optional[_Union[CommPattern, _Mapping]] = ..., node_list: _Optional[str] = ..., risk: _Optional[float] = ..., script: _Optional[bytes] = ..., argv: _Optional[_Iterable[str]] = ..., environment: _Optional[_Mapping[str, str]] = ..., submit_time: _Optional[int] = ..., job_id: _Optional[str] = ..., script_bytes: _Optional[int] = ..., max_time_s: _Optional[int] = ..., default_time_s: _Optional[int] = ..., time_min_s: _Optional[int] = ..., time_limit_unlimited: bool = ...) -> None: ...

class AllocationRequest(_message.Message):
    __slots__ = ("request", "node_list", "job_id", "tasks_per_node", "prediction_id", "job_time_limit_s", "job_time_min_s", "lower_time_limit")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    NODE_LIST_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TASKS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    PREDICTION_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    JOB_TIME_MIN_S_FIELD_NUMBER: _ClassVar[int]
    LOWER_TIME_LIMIT_FIELD_NUMBER: _ClassVar[int]
    request: JobRequest
    node_list: str
    job_id: str
    tasks_per_node: str
    prediction_id: str
    job_time_limit_s: int
    job_time_min_s: int
    lower_time_limit: bool
    def __init__(self, request: _Optional[_Union[JobRequest, _Mapping]] = ..., node_list: _Optional[str] = ..., job_id: _Optional[str] = ..., tasks_per_node: _Optional[str] = ..., prediction_id: _Optional[str] = ..., job_time_limit_s: _Optional[int] = ..., job_time_min_s: _Optional[int] = ..., lower_time_limit: bool = ...) -> None: ...

class Interval(_message.Message):
    __slots__ = ("low_s", "high_s", "coverage")
    LOW_S_FIELD_NUMBER: _ClassVar[int]
    HIGH_S_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_FIELD_NUMBER: _ClassVar[int]
    low_s: float
    high_s: float
    coverage: float
    def __init__(self, low_s: _Optional[float] = ..., high_s: _Optional[float] = ..., coverage: _Optional[float] = ...) -> None: ...

class NodeAdvice(_message.Message):
    __slots__ = ("nodes", "runtime_s", "node_hours", "efficiency", "recommended")
    NODES_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_S_FIELD_NUMBER: _ClassVar[int]
    NODE_HOURS_FIELD_NUMBER: _ClassVar[int]
    EFFICIENCY_FIELD_NUMBER: _ClassVar[int]
    RECOMMENDED_FIELD_NUMBER: _ClassVar[int]
    nodes: int
    runtime_s: float
    node_hours: float
    efficiency: float
    recommended: bool
    def __init__(self, nodes: _Optional[int] = ..., runtime_s: _Optional[float] = ..., node_hours: _Optional[float] = ..., efficiency: _Optional[float] = ..., recommended: bool = ...) -> None: ...

class Estimate(_message.Message):
    __slots__ = ("prediction_id", "runtime_s", "interval", "comm_time_s", "suggested_time_limit_s", "suggested_time_min_s", "node_advice", "explanation", "model_name", "model_version", "fallback", "feature_class", "risk", "application", "comm_model", "apply_time_limit_s", "apply_time_min_s", "policy_mode", "policy_reason", "user_message")
    PREDICTION_ID_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_S_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    COMM_TIME_S_FIELD_NUMBER: _ClassVar[int]
    SUGGESTED_TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    SUGGESTED_TIME_MIN_S_FIELD_NUMBER: _ClassVar[int]
    NODE_ADVICE_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    FEATURE_CLASS_FIELD_NUMBER: _ClassVar[int]
    RISK_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    COMM_MODEL_FIELD_NUMBER: _ClassVar[int]
    APPLY_TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    APPLY_TIME_MIN_S_FIELD_NUMBER: _ClassVar[int]
    POLICY_MODE_FIELD_NUMBER: _ClassVar[int]
    POLICY_REASON_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    prediction_id: str
    runtime_s: float
    interval: Interval
    comm_time_s: float
    suggested_time_limit_s: int
    suggested_time_min_s: int
    node_advice: _containers.RepeatedCompositeFieldContainer[NodeAdvice]
    explanation: _containers.RepeatedScalarFieldContainer[str]
    model_name: str
    model_version: str
    fallback: bool
    feature_class: str
    risk: float
    application: str
    comm_model: str
    apply_time_limit_s: int
    apply_time_min_s: int
    policy_mode: str
    policy_reason: str
    user_message: str
    def __init__(self, prediction_id: _Optional[str] = ..., runtime_s: _Optional[float] = ..., interval: _Optional[_Union[Interval, _Mapping]] = ..., comm_time_s: _Optional[float] = ..., suggested_time_limit_s: _Optional[int] = ..., suggested_time_min_s: _Optional[int] = ..., node_advice: _Optional[_Iterable[_Union[NodeAdvice, _Mapping]]] = ..., explanation: _Optional[_Iterable[str]] = ..., model_name: _Optional[str] = ..., model_version: _Optional[str] = ..., fallback: bool = ..., feature_class: _Optional[str] = ..., risk: _Optional[float] = ..., application: _Optional[str] = ..., comm_model: _Optional[str] = ..., apply_time_limit_s: _Optional[int] = ..., apply_time_min_s: _Optional[int] = ..., policy_mode: _Optional[str] = ..., policy_reason: _Optional[str] = ..., user_message: _Optional[str] = ...) -> None: ...

class Outcome(_message.Message):
    __slots__ = ("job_id", "prediction_id", "submit_time", "start_time", "end_time", "elapsed_s", "state", "exit_code", "request", "node_list")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PREDICTION_ID_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    NODE_LIST_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    prediction_id: str
    submit_time: int
    start_time: int
    end_time: int
    elapsed_s: float
    state: str
    exit_code: int
    request: JobRequest
    node_list: str
    def __init__(self, job_id: _Optional[str] = ..., prediction_id: _Optional[str] = ..., submit_time: _Optional[int] = ..., start_time: _Optional[int] = ..., end_time: _Optional[int] = ..., elapsed_s: _Optional[float] = ..., state: _Optional[str] = ..., exit_code: _Optional[int] = ..., request: _Optional[_Union[JobRequest, _Mapping]] = ..., node_list: _Optional[str] = ...) -> None: ...

class OutcomeAck(_message.Message):
    __slots__ = ("stored", "job_id", "duplicate")
    STORED_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    stored: bool
    job_id: str
    duplicate: bool
    def __init__(self, stored: bool = ..., job_id: _Optional[str] = ..., duplicate: bool = ...) -> None: ...

class ReportedFeature(_message.Message):
    __slots__ = ("key", "value", "at_s")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    AT_S_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: Value
    at_s: float
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ..., at_s: _Optional[float] = ...) -> None: ...

class RuntimeFeatures(_message.Message):
    __slots__ = ("job_id", "prediction_id", "features", "text")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PREDICTION_ID_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    prediction_id: str
    features: _containers.RepeatedCompositeFieldContainer[ReportedFeature]
    text: str
    def __init__(self, job_id: _Optional[str] = ..., prediction_id: _Optional[str] = ..., features: _Optional[_Iterable[_Union[ReportedFeature, _Mapping]]] = ..., text: _Optional[str] = ...) -> None: ...

class ReloadRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("kind", "key", "version", "created", "path", "metadata", "serving", "bundled")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    KIND_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    BUNDLED_FIELD_NUMBER: _ClassVar[int]
    kind: str
    key: str
    version: str
    created: str
    path: str
    metadata: _containers.ScalarMap[str, str]
    serving: bool
    bundled: bool
    def __init__(self, kind: _Optional[str] = ..., key: _Optional[str] = ..., version: _Optional[str] = ..., created: _Optional[str] = ..., path: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., serving: bool = ..., bundled: bool = ...) -> None: ...

class ReloadReply(_message.Message):
    __slots__ = ("models", "errors")
    MODELS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    errors: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ..., errors: _Optional[_Iterable[str]] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelList(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Status(_message.Message):
    __slots__ = ("version", "uptime_s", "models", "jobs", "outcomes", "predictions", "faults", "recent_accuracy", "store", "requests", "fallbacks", "policy_mode", "policy_reason", "slurm_release", "planning_rule", "total_cpus", "total_nodes", "build")
    class RecentAccuracyEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    PREDICTIONS_FIELD_NUMBER: _ClassVar[int]
    FAULTS_FIELD_NUMBER: _ClassVar[int]
    RECENT_ACCURACY_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    FALLBACKS_FIELD_NUMBER: _ClassVar[int]
    POLICY_MODE_FIELD_NUMBER: _ClassVar[int]
    POLICY_REASON_FIELD_NUMBER: _ClassVar[int]
    SLURM_RELEASE_FIELD_NUMBER: _ClassVar[int]
    PLANNING_RULE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CPUS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_NODES_FIELD_NUMBER: _ClassVar[int]
    BUILD_FIELD_NUMBER: _ClassVar[int]
    version: str
    uptime_s: float
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    jobs: int
    outcomes: int
    predictions: int
    faults: _containers.RepeatedScalarFieldContainer[str]
    recent_accuracy: _containers.ScalarMap[str, float]
    store: str
    requests: int
    fallbacks: int
    policy_mode: str
    policy_reason: str
    slurm_release: str
    planning_rule: str
    total_cpus: int
    total_nodes: int
    build: Build
    def __init__(self, version: _Optional[str] = ..., uptime_s: _Optional[float] = ..., models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ..., jobs: _Optional[int] = ..., outcomes: _Optional[int] = ..., predictions: _Optional[int] = ..., faults: _Optional[_Iterable[str]] = ..., recent_accuracy: _Optional[_Mapping[str, float]] = ..., store: _Optional[str] = ..., requests: _Optional[int] = ..., fallbacks: _Optional[int] = ..., policy_mode: _Optional[str] = ..., policy_reason: _Optional[str] = ..., slurm_release: _Optional[str] = ..., planning_rule: _Optional[str] = ..., total_cpus: _Optional[int] = ..., total_nodes: _Optional[int] = ..., build: _Optional[_Union[Build, _Mapping]] = ...) -> None: ...

class Build(_message.Message):
    __slots__ = ("version", "commit")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    version: str
    commit: str
    def __init__(self, version: _Optional[str] = ..., commit: _Optional[str] = ...) -> None: ...

class JobRecordRequest(_message.Message):
    __slots__ = ("job_id", "cluster", "history")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    cluster: str
    history: int
    def __init__(self, job_id: _Optional[str] = ..., cluster: _Optional[str] = ..., history: _Optional[int] = ...) -> None: ...

class JobRecordReply(_message.Message):
    __slots__ = ("job_rows_json", "predictions_json", "history_json")
    JOB_ROWS_JSON_FIELD_NUMBER: _ClassVar[int]
    PREDICTIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    HISTORY_JSON_FIELD_NUMBER: _ClassVar[int]
    job_rows_json: str
    predictions_json: str
    history_json: str
    def __init__(self, job_rows_json: _Optional[str] = ..., predictions_json: _Optional[str] = ..., history_json: _Optional[str] = ...) -> None: ...

class UserReportRequest(_message.Message):
    __slots__ = ("user", "account", "since", "cluster", "by")
    USER_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    user: str
    account: str
    since: float
    cluster: str
    by: str
    def __init__(self, user: _Optional[str] = ..., account: _Optional[str] = ..., since: _Optional[float] = ..., cluster: _Optional[str] = ..., by: _Optional[str] = ...) -> None: ...

class UserReportReply(_message.Message):
    __slots__ = ("rows_json", "suggestions_json", "rows_cap")
    ROWS_JSON_FIELD_NUMBER: _ClassVar[int]
    SUGGESTIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    ROWS_CAP_FIELD_NUMBER: _ClassVar[int]
    rows_json: str
    suggestions_json: str
    rows_cap: int
    def __init__(self, rows_json: _Optional[str] = ..., suggestions_json: _Optional[str] = ..., rows_cap: _Optional[int] = ...) -> None: ...

class WhenRequest(_message.Message):
    __slots__ = ("job_id", "request")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    request: JobRequest
    def __init__(self, job_id: _Optional[str] = ..., request: _Optional[_Union[JobRequest, _Mapping]] = ...) -> None: ...

class StartEstimate(_message.Message):
    __slots__ = ("job_id", "user", "state", "median_start_s", "low80_start_s", "high80_start_s", "slurm_start_s", "squeue_start_s", "started_s", "snapshot_s", "snapshot_age_s", "runs", "planning_rule", "caveats")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MEDIAN_START_S_FIELD_NUMBER: _ClassVar[int]
    LOW80_START_S_FIELD_NUMBER: _ClassVar[int]
    HIGH80_START_S_FIELD_NUMBER: _ClassVar[int]
    SLURM_START_S_FIELD_NUMBER: _ClassVar[int]
    SQUEUE_START_S_FIELD_NUMBER: _ClassVar[int]
    STARTED_S_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_S_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_AGE_S_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    PLANNING_RULE_FIELD_NUMBER: _ClassVar[int]
    CAVEATS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    user: str
    state: str
    median_start_s: float
    low80_start_s: float
    high80_start_s: float
    slurm_start_s: float
    squeue_start_s: float
    started_s: float
    snapshot_s: float
    snapshot_age_s: float
    runs: int
    planning_rule: str
    caveats: str
    def __init__(self, job_id: _Optional[str] = ..., user: _Optional[str] = ..., state: _Optional[str] = ..., median_start_s: _Optional[float] = ..., low80_start_s: _Optional[float] = ..., high80_start_s: _Optional[float] = ..., slurm_start_s: _Optional[float] = ..., squeue_start_s: _Optional[float] = ..., started_s: _Optional[float] = ..., snapshot_s: _Optional[float] = ..., snapshot_age_s: _Optional[float] = ..., runs: _Optional[int] = ..., planning_rule: _Optional[str] = ..., caveats: _Optional[str] = ...) -> None: ...
