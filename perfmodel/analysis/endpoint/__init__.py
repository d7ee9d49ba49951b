"""Load-test a live OpenAI-compatible server (seed 003's recipe) and record the experiment.

    cfg = EndpointConfig(url="http://127.0.0.1:8000/v1", model="m", concurrency=(1, 2, 4))
    run = run_benchmark(cfg)          # BenchmarkRun: levels, knee, experiment record

Pieces: config.py (bounds, errors), client.py (prompts, /models probe, one streamed request),
stats.py (summarize, find_knee), run.py (run_level, run_benchmark), record.py (the record),
gpu.py (nvidia-smi), predict.py (the model's estimate beside each level, --predict).
"""

from perfmodel.analysis.endpoint.client import WORDS, ServerInfo, build_prompt, probe_server
from perfmodel.analysis.endpoint.config import (MAX_CONCURRENCY, MAX_LEVELS, MAX_REQUESTS, MAX_SECONDS,
                                       ApiKeyError, EndpointConfig, EndpointError,
                                       EndpointUnreachableError, ModelNotServedError,
                                       NotOpenAIEndpointError)
from perfmodel.analysis.endpoint.predict import Prediction, PredictSpec, with_predictions
from perfmodel.analysis.endpoint.record import ExperimentRecord, SampledOutput
from perfmodel.analysis.endpoint.run import BenchmarkRun, LevelResult, run_benchmark, run_level
from perfmodel.analysis.endpoint.stats import (KNEE_MIN_GAIN, Knee, LevelStats, RequestSample, find_knee,
                                      percentile, summarize)

__all__ = [
    "ApiKeyError", "BenchmarkRun", "EndpointConfig", "EndpointError", "EndpointUnreachableError",
    "ExperimentRecord", "KNEE_MIN_GAIN", "Knee", "LevelResult", "LevelStats", "MAX_CONCURRENCY",
    "MAX_LEVELS", "MAX_REQUESTS", "MAX_SECONDS", "ModelNotServedError", "NotOpenAIEndpointError",
    "Prediction", "PredictSpec", "RequestSample", "SampledOutput", "ServerInfo", "WORDS", "build_prompt",
    "find_knee", "percentile", "probe_server", "run_benchmark", "run_level", "summarize",
    "with_predictions",
]
