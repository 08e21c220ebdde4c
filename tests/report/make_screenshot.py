"""Take ``docs/report.png``: a study's report, shot by headless Chromium at 1400 x 2400.

Usage::

    python -m tests.report.make_screenshot [--storage sqlite:///studies/glm5-emulated.db]
        [--study-name glm5] [--out docs/report.png]

Without ``--storage`` the synthetic study of :mod:`tests.support.study_factory` is shown.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import optuna

from tests.support.browser import screenshot
from tests.support.study_factory import make_study
from tuner.report import write_report
from tuner.study.storage import load_existing_study


def main() -> None:
    """Write the report to a temporary folder, then shoot it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage")
    parser.add_argument("--study-name", default="glm5")
    parser.add_argument("--out", type=Path, default=Path("docs/report.png"))
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="tuner-shot-") as tmp:
        work = Path(tmp)
        if args.storage:
            study = load_existing_study(args.storage, args.study_name)
        else:
            study = make_study(f"sqlite:///{work / 'synthetic.db'}", n_sampled=30)
        page = write_report(study, work / "report.html")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        screenshot(page, args.out, work / "chromium")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
