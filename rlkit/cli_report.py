"""``rlkit report``'s tools beside a sweep's report: ``walltime``, ``tags``, ``staleness`` and
``scalars``. Each prints what it found; the first three print a markdown section, which
``--write FILE`` also appends to FILE.

``rlkit report NAME ...`` runs the tool NAME; any other first argument is a sweep folder
(``rlkit report SWEEP_DIR [flags]``). A sweep folder named like a tool is reported with
``rlkit report -- NAME`` (or ``rlkit report ./NAME``).
"""

from __future__ import annotations

import argparse
import json
from typing import Callable

TOOLS = {
    "walltime": "A finished sweep's wall time from its runs' TensorBoard events, its packs' recorded seconds on "
                "the workers and, with --measure-steps, what the same runs would take one per process (each "
                "(variant, env) trained alone briefly and scaled to its budget).",
    "tags": "Per variant, env and tag of a sweep: the mean over seeds of each run's mean over its first and its "
            "last K values of TensorBoard tags (how an outer update's norm or the approx KL evolves).",
    "staleness": "How stale HP3O's replayed data is, per env and variant of a sweep: the mean of the hp3o/ "
                 "replay diagnostics, the clip fraction and the approx KL over every update, beside the final "
                 "return.",
    "scalars": "A run's TensorBoard scalars, one line per tag: count, first-K and last-K means, minimum, maximum "
               "and block means (a resumed run read as TensorBoard reads it).",
}
"""Tool name -> its description (its ``--help``)."""


def tools_help() -> str:
    """The lines ``rlkit report --help`` ends with: the tools and how to report a folder named like one."""
    names = "|".join(TOOLS)
    return (f"Tools: rlkit report {{{names}}} ... (each with --help). A sweep folder named like a tool: "
            "rlkit report -- NAME (or ./NAME).")


def _write_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--write", default="", metavar="FILE",
                        help="also append the section to FILE (a reading's notes; default: print only)")


def _walltime_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep_dir", help="the sweep's output folder (with manifest.json and status/)")
    parser.add_argument("--gap", type=float, default=600.0,
                        help="longest gap between two events, in seconds, that counts as the sweep running "
                             "(default: 600)")
    parser.add_argument("--measure-steps", type=int, default=50_000,
                        help="steps of each (variant, env) trained alone to estimate the pool (default: 50,000; "
                             "0: the sweep's wall time only, nothing trained)")
    parser.add_argument("--workers", type=int, default=2, help="workers the packs and the pool run on (default: 2)")
    parser.add_argument("--envs", metavar="ENV,ENV,...", help="count only these envs' runs (default: every env)")
    _write_flag(parser)


def _tags_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep_dir", help="the sweep's output folder (with runs.csv)")
    parser.add_argument("--tags", nargs="+", action="extend", required=True, metavar="TAG",
                        help="TensorBoard tags to show (e.g. losses/approx_kl); given again, more tags")
    parser.add_argument("--env", default=None, help="only this env's runs (default: every env)")
    parser.add_argument("--k", type=int, default=10, help="the first and last K values of each run (default: 10)")
    _write_flag(parser)


def _staleness_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep_dir", help="the output folder of a sweep with HP3O runs (with runs.csv)")
    _write_flag(parser)


def _scalars_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run folder (all its event files) or one event file")
    parser.add_argument("--tags", nargs="+", action="extend", default=[], metavar="TAG",
                        help="only these tags (default: every tag); given again, more tags")
    parser.add_argument("--k", type=int, default=10, help="the first and last K values (default: 10)")
    parser.add_argument("--block", type=int, default=0,
                        help="also the means of consecutive blocks of this many values (default: 0, none)")


def _walltime(args: argparse.Namespace) -> list[str]:
    from rlkit.ablation.walltime import sweep_walltime

    return sweep_walltime(args.sweep_dir, args.gap, args.measure_steps, args.workers, args.envs)


def _tags(args: argparse.Namespace) -> list[str]:
    from rlkit.ablation.diagnostics import sweep_tags

    return sweep_tags(args.sweep_dir, args.tags, args.env, args.k)


def _staleness(args: argparse.Namespace) -> list[str]:
    from rlkit.ablation.diagnostics import staleness

    return staleness(args.sweep_dir)


def _scalars(args: argparse.Namespace) -> list[str]:
    from rlkit.ablation.events import scalar_summary

    return scalar_summary(args.run, args.tags, args.k, args.block)


_FLAGS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "walltime": _walltime_flags, "tags": _tags_flags, "staleness": _staleness_flags, "scalars": _scalars_flags}
_RUN: dict[str, Callable[[argparse.Namespace], list[str]]] = {
    "walltime": _walltime, "tags": _tags, "staleness": _staleness, "scalars": _scalars}


def run_tool(name: str, argv: list[str], parser_class: type[argparse.ArgumentParser]) -> str:
    """``rlkit report NAME ARGV``: parse with ``parser_class`` (the CLI's, whose errors are one
    line), refuse an unwritable ``--write`` before anything is read or measured, append the result
    to the ``--write`` file and return it (the CLI prints it)."""
    parser = parser_class(prog=f"rlkit report {name}", description=TOOLS[name])
    _FLAGS[name](parser)
    args = parser.parse_args(argv)
    write = getattr(args, "write", "")
    from rlkit.ablation.measurements import check_target, write_section

    if write:
        check_target(write)
    text = "\n".join(_RUN[name](args))
    if write:
        write_section(write, text)
    return text


class _Once(argparse.Action):
    """A list flag given once: a second ``--envs`` would silently replace the first."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest) is not None:
            parser.error(f"{option_string} given twice: name every choice in one, separated by commas")
        setattr(namespace, self.dest, values)


def report(argv: list[str], Parser: Callable[..., argparse.ArgumentParser]) -> str:
    """``rlkit report``: what a tool (:data:`TOOLS`) found, or a sweep's report written and its paths
    as JSON: the text to print."""
    if argv[:1] == ["--"]:  # rlkit report -- NAME: the sweep folder NAME, even when a tool has that name
        argv = argv[1:]
    elif argv[:1] and argv[0] in TOOLS:
        return run_tool(argv[0], argv[1:], Parser)
    parser = Parser(prog="rlkit report", description="Statistics and figures of a sweep.", epilog=tools_help())
    parser.add_argument("sweep_dir", help="the sweep's output folder (rlkit sweep --out)")
    parser.add_argument("--baseline", default=None, help="variant others are compared to (default: the spec's)")
    parser.add_argument("--metric", default="final", choices=["final", "auc", "train100"],
                        help="each run's score: its last evaluation, the mean over a common step grid of its "
                        "evaluations, or the mean return of its last 100 training episodes (the PPO paper's)")
    parser.add_argument("--normalize", default="minmax", choices=["none", "minmax", "best-mean"], help="across "
                        "envs: scores scaled from each env's random-policy return (0) to the spec's reference or "
                        "the best run (1, minmax), or to the best variant's mean (1, best-mean: the PPO paper's "
                        "Table 1; the spec's random, never its reference), or none (default: minmax)")
    parser.add_argument("--reps", type=int, help="bootstrap resamples of every interval and band, 100 to "
                        "1,000,000 (default: 20,000; a 95%% percentile interval needs enough of them)")
    parser.add_argument("--variants", metavar="A,B,...", action=_Once, help="show the baseline and these variants "
                        "only, in the figures and tables (each with the full report's statistics; the spec's order)")
    parser.add_argument("--envs", metavar="A,B,...", action=_Once, help="report on these environments alone: every "
                        "statistic, the references and the aggregate included, computed over their runs (tables in "
                        "the spec's order)")
    parser.add_argument("--out", default=None, metavar="DIR", help="where the report goes (default: "
                        "SWEEP_DIR/report, rewritten each time): a new or empty folder or an earlier report, whose "
                        "figures the new one does not draw are removed")
    args, extra = parser.parse_known_args(argv)
    if extra:
        lists = " (--variants and --envs take names separated by commas, no spaces)" if (
            args.variants or args.envs) and not extra[0].startswith("-") else ""
        parser.error(f"unrecognized arguments: {' '.join(extra)}{lists}")
    from rlkit.ablation.report import write_report
    from rlkit.ablation.selection import split_variants

    chosen, reps = args.variants and split_variants(args.variants), {"reps": args.reps} if args.reps is not None else {}
    envs = None if args.envs is None else [e.strip() for e in args.envs.split(",")]
    return json.dumps(write_report(args.sweep_dir, args.baseline, args.metric, args.normalize, variants=chosen,
                                   out_dir=args.out, envs=envs, **reps))
