from pathlib import Path

import pytest

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


@pytest.fixture(scope="session")
def traces() -> Path:
    return TRACES


@pytest.fixture(scope="session")
def kth_slice(tmp_path_factory) -> Path:
    """The SWF header and first 2,000 jobs of KTH-SP2 (real data, small enough for tests)."""
    lines = (TRACES / "KTH-SP2.swf").read_text().splitlines()
    header = [line for line in lines if line.startswith(";")]
    jobs = [line for line in lines if line.strip() and not line.startswith(";")][:2000]
    path = tmp_path_factory.mktemp("traces") / "kth-2000.swf"
    path.write_text("\n".join(header + jobs) + "\n")
    return path
