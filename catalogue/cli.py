"""The ``catalogue`` command: list, show, run, report, verify, score, schema.

Exit codes: 0 everything ran; 1 some claim errored (the others still ran and were stored);
2 bad input (one line on stderr, never a traceback); 130 interrupted (finished records kept).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import operator
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn

from pydantic import Field, TypeAdapter, ValidationError, create_model
from tabulate import tabulate

from catalogue import registry, store
from catalogue.atomic import atomic_write_text
from catalogue.claim import MODES, Claim
from catalogue.families import FAMILIES
from catalogue.record import Record
from catalogue.report import CHECK_HEADERS, check_rows, format_value, seed_rows
from constructions.specs import Spec

__all__ = ["main", "UsageError", "load_spec_file", "spec_file_schema"]

VERDICT_MARK = {"holds": "✓", "refuted": "✗", "inconclusive": "?", "error": "!"}


class UsageError(Exception):
    """Bad input: reported as one line and exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


# ---------------------------------------------------------------------- spec files
def _format_validation_error(exc: ValidationError, prefix: str = "") -> str:
    err = exc.errors()[0]
    # a key with control characters is shown escaped: the error stays one line
    loc = ".".join(str(part) if str(part).isprintable() else ascii(str(part)) for part in err["loc"])
    field = f"{prefix}{loc}" if loc else prefix.rstrip(".") or "spec"
    value = err.get("input")
    shown = json.dumps(value)[:60] if isinstance(value, int | float | str | bool | type(None)) else type(value).__name__
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{field}: {err['msg']} (got {shown}){more}"


class SpecFile(Spec):
    """A user's run request: a claim id, its parameters, and optionally a seed."""

    claim: str
    params: dict[str, Any] = Field(default_factory=dict)
    seed: int | None = None


def load_spec_file(path: str) -> tuple[Claim, Spec, int | None]:
    """Read a JSON or TOML spec file; raise :class:`UsageError` naming the bad field."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read spec file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"invalid spec file {path}: not UTF-8 text") from None
    try:
        if p.suffix.lower() == ".toml":
            try:
                import tomllib
            except ModuleNotFoundError:  # Python < 3.11
                import tomli as tomllib
            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than the parser's stack
        shown = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise UsageError(f"invalid spec file {path}: not valid {p.suffix.lstrip('.') or 'JSON'}: {shown}") from None
    # strict types: "3" is not 3, "yes" is not true, true is not 1 (JSON mode still reads arrays as tuples)
    try:
        request = SpecFile.model_validate_json(json.dumps(data), strict=True)
    except (TypeError, ValueError, RecursionError) as exc:
        if isinstance(exc, ValidationError):
            raise UsageError(f"invalid spec file {path}: {_format_validation_error(exc)}") from None
        raise UsageError(f"invalid spec file {path}: holds a value a spec cannot (a date, a time): {exc}") from None
    try:
        claim = registry.get(request.claim)
    except registry.UnknownClaim as exc:
        raise UsageError(f"invalid spec file {path}: claim: {exc}") from None
    try:
        params = claim.params.model_validate_json(json.dumps(request.params), strict=True)
    except ValidationError as exc:
        raise UsageError(f"invalid spec file {path}: {_format_validation_error(exc, 'params.')}") from None
    return claim, params, request.seed


def spec_file_schema(claim_id: str | None = None) -> dict:
    """JSON Schema of spec files: one alternative per claim, discriminated on ``claim``."""
    claims = [registry.get(claim_id)] if claim_id else registry.all_claims()
    models = [
        create_model(
            "Run_" + c.id.replace(".", "__").replace("-", "_"),
            __base__=Spec,
            __doc__=f"{c.title}",
            claim=(Literal[c.id], ...),
            params=(c.params, ...),
            seed=(int | None, None),
        )
        for c in claims
    ]
    if len(models) == 1:
        return models[0].model_json_schema()
    union = Annotated[functools.reduce(operator.or_, models), Field(discriminator="claim")]
    return TypeAdapter(union).json_schema()


# ---------------------------------------------------------------------- verbs
def _check_family(family: str | None) -> None:
    if family and family not in (known := registry.families()):
        raise UsageError(f"--family: unknown family {family!r}; families are {', '.join(known)}")


def _load_plugins(args) -> None:
    for path in getattr(args, "plugin", None) or ():
        try:
            registry.load_plugin(path)
        except registry.PluginError as exc:
            raise UsageError(str(exc)) from None


RECORDS = "report/records"


def _read_records(args) -> tuple[store.Scan, int]:
    """Scan the records directory the strict way; one warning line per file that is not current.

    Returns the scan and the exit code the warnings call for (1 under ``--strict``, else 0).
    """
    scanned = store.scan(args.results)
    for line in scanned.warnings:
        print(f"catalogue: warning: {line}", file=sys.stderr)
    return scanned, 1 if args.strict and scanned.warnings else 0


def _cmd_list(args) -> int:
    _check_family(args.family)
    scanned, code = _read_records(args)
    records = scanned.records
    claims = registry.all_claims(args.family)
    if args.json:
        print(json.dumps([_claim_json(c, scanned) for c in claims], indent=2, ensure_ascii=False))
        return code
    rows = []
    for c in claims:
        last = ", ".join(
            f"{VERDICT_MARK[rec.verdict]} {rec.verdict} ({rec.mode})"
            for rec in (records.get(c.id), scanned.paper_records.get(c.id))
            if rec is not None
        )
        rows.append([c.id, c.kind, c.source_verdict, last or "—"])
    print(tabulate(rows, headers=["id", "kind", "source says", "last verdict"], tablefmt="simple"))
    print("\n`catalogue show ID` prints a claim's statement, source, rule, controls and evidence.")
    return code


def _claim_json(claim: Claim, scanned: store.Scan) -> dict[str, Any]:
    """A claim and its usable records, as ``list --json`` and ``show --json`` print them."""
    found = {
        "full": scanned.records.get(claim.id),
        "paper": scanned.paper_records.get(claim.id),
        **{f"control:{c.name}": scanned.control_records.get((claim.id, c.name)) for c in claim.controls},
    }
    return {
        "id": claim.id,
        "title": claim.title,
        "statement": claim.statement,
        "kind": claim.kind,
        "source": claim.source.cite(),
        "source_verdict": claim.source_verdict,
        "controls": [dataclasses.asdict(c) for c in claim.controls],
        "seeds": claim.seeds,
        "records": {k: r.model_dump(mode="json") for k, r in found.items() if r is not None},
    }


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width))


def _cmd_show(args) -> int:
    claim = _get_claim(args.claim_id)
    if args.json:
        scanned, code = _read_records(args)
        print(json.dumps(_claim_json(claim, scanned), indent=2, ensure_ascii=False, default=str))
        return code
    print(f"{claim.id}: {claim.title}\n")
    print(f"statement: {claim.statement}")
    print(f"source: {claim.source.cite()}" + (f" (seed {claim.source.seed})" if claim.source.seed else ""))
    print(f"kind: {claim.kind}" + (f"; full mode pools seeds 0–{claim.seeds - 1}" if claim.seeds > 1 else ""))
    print(f"source says: {claim.source_verdict}")
    reasons: dict[str, list[str]] = {}  # reason → the modes it is given for
    for mode in claim.expected_failure_modes if claim.expected_failure else ():
        reasons.setdefault(claim.expected_failure_in(mode), []).append(mode)
    for reason, modes in reasons.items():
        print(f"does not reproduce here ({' and '.join(modes)} mode): {reason}")
    if claim.rule is not None:
        print(f"verdict rule: {claim.rule.describe()}")
    for control in claim.controls:
        changes = json.dumps(control.changes, ensure_ascii=False)
        print(f"control {control.name} (should be {control.expect}): {control.breaks}; changes {changes}")
    if not claim.controls:
        print("controls: none declared yet")
    for mode in ("quick", "full"):
        print(f"\n{mode} spec:\n{json.dumps(claim.spec_for(mode).model_dump(mode='json'), indent=2)}")
    if claim.paper is not None:
        print(f"\npaper spec (the source's budget):\n{json.dumps(claim.paper.model_dump(mode='json'), indent=2)}")
    scanned, code = _read_records(args)
    shown = [rec for rec in (scanned.records.get(claim.id), scanned.paper_records.get(claim.id)) if rec is not None]
    if not shown:
        print(f"\nno usable record in {args.results}/: `catalogue run {claim.id} --out {args.results}`")
    for rec in shown:
        print(f"\nlast run: {rec.verdict} ({rec.mode}, seed {rec.seed}, {rec.seconds:.1f} s, {rec.created_at})")
        if rec.error:
            print(f"error: {rec.error}")
        if rec.checks:
            print(tabulate(check_rows(rec), headers=CHECK_HEADERS))
        if rec.seeds:
            headers, rows = seed_rows(rec)
            print(tabulate(rows, headers=headers))
        print(tabulate([[k, format_value(v, 6, 8)] for k, v in rec.evidence.items()], headers=["evidence", "value"]))
        if rec.thresholds:
            rows = [[k, format_value(v, 6, 8)] for k, v in rec.thresholds.items()]
            print(tabulate(rows, headers=["threshold", "value"]))
    return code


def _get_claim(claim_id: str) -> Claim:
    try:
        return registry.get(claim_id)
    except registry.UnknownClaim as exc:
        raise UsageError(str(exc)) from None


def _select_claims(args) -> list[Claim]:
    chosen = sum(bool(x) for x in (args.all, args.claim_ids, args.family, args.spec))
    if chosen != 1:
        raise UsageError("run: give exactly one of --all, claim ids, --family F or --spec FILE")
    if args.all:
        return registry.all_claims()
    if args.family:
        _check_family(args.family)
        claims = registry.all_claims(args.family)
        if not claims:
            raise UsageError(f"--family: no claims registered for {args.family!r} yet")
        return claims
    return [_get_claim(cid) for cid in dict.fromkeys(args.claim_ids)]


def _check_writable(out: Path) -> None:
    """Fail before the first claim runs, not after it: create ``out`` and write a probe file there."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"--out: cannot write records to {out}: {exc.strerror or exc}") from None


def _cmd_run(args) -> int:
    from tqdm import tqdm

    from catalogue.runner import plan_jobs, run_jobs

    if args.jobs == 0 or args.jobs < -1:
        raise UsageError(f"--jobs: must be a positive integer or -1, got {args.jobs}")
    if args.scheduler and args.backend != "dask":
        raise UsageError("--scheduler needs --backend dask")
    seed = args.seed
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} exists and is not a directory")
    _check_writable(out)
    budget = "quick" if args.quick else ("full" if args.full else args.budget)
    if args.spec:
        if args.quick or args.full or args.budget:
            raise UsageError("--spec runs the file's parameters; drop --quick/--full/--budget")
        if args.all or args.family or args.claim_ids:
            raise UsageError("run: give exactly one of --all, claim ids, --family F or --spec FILE")
        claim, params, file_seed = load_spec_file(args.spec)
        seed = seed if seed is not None else (file_seed or 0)
        jobs = plan_jobs([claim], "custom", seed, params, controls=args.controls)
    else:
        claims = _select_claims(args)
        if budget == "paper" and args.claim_ids:
            without = [c.id for c in claims if c.paper is None]
            if without:
                raise UsageError(f"--budget paper: {', '.join(without)} has no paper budget (full is its source's)")
        if args.controls and budget == "paper":
            raise UsageError("--controls: controls run in quick or full mode (--budget paper runs none)")
        # --seed S runs that seed alone; without it, a claim that pools seeds runs all of them
        jobs = plan_jobs(claims, budget or "full", seed or 0, controls=args.controls, sweep=seed is None)
    jobs = [dataclasses.replace(job, progress=not args.no_progress) for job in jobs]
    # the committed records, read before this run may overwrite them (what --strict compares with)
    committed = (
        {
            store.record_name(c.record.claim_id, c.record.mode, c.record.control): c.record
            for c in store.scan(RECORDS).checks
            if c.record
        }
        if args.strict
        else {}
    )
    bar = tqdm(total=len(jobs), desc="claims", unit="claim", file=sys.stderr, disable=args.no_progress)
    stored: list[Record] = []

    def finished(rec: Record) -> None:
        stored.append(rec)
        note = f"  {rec.error}" if rec.error else ""
        if rec.control:
            note += f"  (should be {registry.get(rec.claim_id).control(rec.control).expect})" if not rec.agrees else ""
        name = store.record_name(rec.claim_id, rec.mode, rec.control)
        bar.write(
            f"{VERDICT_MARK[rec.verdict]} {rec.verdict:<12} {name}  ({rec.seconds:.1f} s){note}",
            file=sys.stderr,
        )
        bar.update(1)

    def skipped(job) -> None:
        name = store.record_name(job.claim_id, job.mode, job.control)
        bar.write(f"= resumed      {name}  (record is current)", file=sys.stderr)
        bar.update(1)

    try:
        run_jobs(
            jobs,
            out,
            n_jobs=args.jobs,
            backend=args.backend,
            scheduler=args.scheduler,
            resume=args.resume,
            on_record=finished,
            on_skip=skipped,
        )
    except KeyboardInterrupt:
        bar.close()
        print(
            f"interrupted: {len(stored)} finished record(s) kept in {out}/; rerun with --resume",
            file=sys.stderr,
        )
        return 130
    bar.close()
    counts = {v: sum(r.verdict == v for r in stored) for v in VERDICT_MARK}
    claims_run = [r for r in stored if r.control is None]
    controls_run = [r for r in stored if r.control is not None]
    control_text = (
        f"; {sum(r.agrees for r in controls_run)}/{len(controls_run)} controls came out as they should"
        if controls_run
        else ""
    )
    print(
        f"{len(stored)} run, {len(jobs) - len(stored)} resumed: "
        + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
        + f"; {sum(r.agrees for r in claims_run)}/{len(claims_run)} agree with their source{control_text}. "
        + f"Records in {out}/"
    )
    if counts["error"]:
        return 1
    if args.strict:
        surprises = _surprises(stored, committed)
        for line in surprises:
            print(f"catalogue: strict: {line}", file=sys.stderr)
        return 1 if surprises else 0
    return 0


def _surprises(stored: list[Record], committed: dict[str, Record]) -> list[str]:
    """What ``run --strict`` fails on: a verdict that disagrees with its source with no recorded
    reason, a control that did not come out as declared, a verdict that differs from the
    committed record of the same mode and seed."""
    lines = []
    for rec in stored:
        name = store.record_name(rec.claim_id, rec.mode, rec.control)
        if not rec.agrees and rec.control is None and not rec.expected_failure:
            lines.append(f"{name}: {rec.verdict}, the source says {rec.source_verdict}, and no reason is recorded")
        if not rec.agrees and rec.control is not None:
            lines.append(f"{name}: the control came out {rec.verdict}, not as declared")
        old = committed.get(name)
        if old is not None and (old.mode, old.seed) == (rec.mode, rec.seed) and old.verdict != rec.verdict:
            lines.append(f"{name}: {rec.verdict}, the committed record says {old.verdict}")
    return lines


def _cmd_report(args) -> int:
    from catalogue.report import readme_claims_table, replace_readme_table, write_report

    results = Path(args.results)
    if not results.is_dir():
        raise UsageError(f"--results: no such directory {results}; run `catalogue run --all` first")
    if Path(args.out).is_dir():
        raise UsageError(f"--out: {args.out} is a directory; give the report's file name")
    scanned, code = _read_records(args)
    records = scanned.records
    if not records:
        raise UsageError(f"--results: no usable records in {results}/; run `catalogue run --all` first")
    stale = {
        store.record_name(c.record.claim_id, c.record.mode, c.record.control): c.reason
        for c in scanned.checks
        if c.status == "stale" and c.record
    }
    path = write_report(
        records, Path(args.out), stale=stale, paper=scanned.paper_records, controls=scanned.control_records
    )
    if args.readme:
        readme = Path(args.readme)
        table = readme_claims_table(records, scanned.paper_records, scanned.control_records)
        try:
            atomic_write_text(readme, replace_readme_table(readme.read_text(encoding="utf-8"), table))
        except (OSError, ValueError) as exc:
            raise UsageError(f"--readme: {readme}: {exc}") from None
    left_out = sum(c.record is None for c in scanned.checks)
    print(
        f"wrote {path} from {len(records)} record(s)"
        + (f" and {len(scanned.paper_records)} at the paper's budget" if scanned.paper_records else "")
        + (f"; {len(stale)} stale" if stale else "")
        + (f"; {left_out} file(s) left out (see the warnings)" if left_out else "")
    )
    return code


def _cmd_verify(args) -> int:
    from catalogue.verify import verify_records

    results = Path(args.records or args.results)
    if not results.is_dir():
        raise UsageError(f"--results: no such directory {results}")
    if args.rerun_sample < 0:
        raise UsageError(f"--rerun-sample: must be ≥ 0, got {args.rerun_sample}")
    if not (0.0 <= args.rtol < 1.0):
        raise UsageError(f"--rtol: must be in [0, 1), got {args.rtol}")
    if args.rerun and args.rerun_sample:
        raise UsageError("verify: give --rerun IDs or --rerun-sample K, not both")
    for cid in args.rerun or ():
        _get_claim(cid)
    if not any(results.glob("*.json")):
        raise UsageError(f"--results: no record files in {results}/")

    def rerun_done(rec: Record) -> None:
        print(f"  rerun {rec.claim_id}: {rec.verdict} ({rec.seconds:.1f} s)", file=sys.stderr)

    rows = verify_records(
        results,
        rerun=args.rerun or (),
        sample=args.rerun_sample,
        sample_seed=args.sample_seed,
        n_jobs=args.jobs,
        on_rerun=None if args.json else rerun_done,
        rtol=args.rtol,
    )
    allowed = {"current", "stale"} if args.allow_stale else {"current"}
    failed = [v for v in rows if v.status not in allowed or v.rerun not in (None, "reproduced")]
    if args.json:
        print(json.dumps({"results": str(results), "ok": not failed, "records": [v.row() for v in rows]}, indent=2))
        return 1 if failed else 0
    table = [
        [
            v.claim_id,
            v.status,
            v.rerun or "",
            _wrap(v.detail, 70) if v.detail else _wrap("; ".join(v.differences[:5]), 70),
        ]
        for v in rows
    ]
    print(tabulate(table, headers=["record", "status", "rerun", "detail"], tablefmt="simple"))
    for v in rows:
        for line in v.differences[:20]:
            print(f"  {v.claim_id}: {line}")
    counts = {s: sum(v.status == s for v in rows) for s in ("current", "stale", "edited", "invalid")}
    reran = [v for v in rows if v.rerun]
    print(
        f"{len(rows)} file(s): "
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        + (f"; {sum(v.rerun == 'reproduced' for v in reran)}/{len(reran)} rerun(s) reproduced" if reran else "")
        + (" — verified" if not failed else f" — {len(failed)} not verified")
    )
    return 1 if failed else 0


def _cmd_score(args) -> int:
    from catalogue.parallel import Execution
    from catalogue.score import ScoreSettings, score_measures
    from catalogue.user_measures import MeasureSpecError, load_measure

    if args.jobs == 0 or args.jobs < -1:
        raise UsageError(f"--jobs: must be a positive integer or -1, got {args.jobs}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} exists and is not a directory")
    _check_writable(out)
    try:
        for spec in args.measures:  # every name resolves before any work starts
            load_measure(spec)
    except MeasureSpecError as exc:
        raise UsageError(str(exc)) from None
    settings = ScoreSettings(
        mode="quick" if args.quick else "full",
        seed=args.seed,
        # full mode reads (and adds to) the stored rows of the main job; quick rows stay beside the scorecard
        records=Path(args.records or RECORDS),
        execution=Execution(args.jobs),
        progress=not args.no_progress,
    )
    cards = score_measures(args.measures, settings, out)
    for card in cards:
        print(f"{card['measure']}")
        for part in ("invariance", "counterexamples", "benchmark"):
            print(f"  {part}: {card[part]['verdict']}")
    print(f"scorecard: {out / 'scorecard.md'}")
    return 0


def _cmd_schema(args) -> int:
    if args.claim_id:
        _get_claim(args.claim_id)
    print(json.dumps(spec_file_schema(args.claim_id), indent=2))
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("flatness-catalogue")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="catalogue", description="Run and report claims about flatness and generalization.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    plugin = _Parser(add_help=False)
    plugin.add_argument(
        "--plugin",
        action="append",
        metavar="FILE",
        help="a Python file of claims to register beside the built-in ones (repeatable); installed entry points of "
        "flatness_catalogue.claims are found without it",
    )

    strict = "warnings about record files (stale, edited, invalid) make the exit code 1"
    p = sub.add_parser("list", parents=[plugin], help="table of claims with their last verdict")
    p.add_argument("--family", help=f"one of {', '.join(FAMILIES)} or a plugin's family")
    p.add_argument("--results", default=RECORDS, help=f"records directory (default {RECORDS}/)")
    p.add_argument("--strict", action="store_true", help=strict)
    p.add_argument("--json", action="store_true", help="print the claims and their records as JSON")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("show", parents=[plugin], help="statement, source, specs and last evidence of one claim")
    p.add_argument("claim_id", help="a claim id (`catalogue list` shows them)")
    p.add_argument("--results", default=RECORDS, help=f"records directory (default {RECORDS}/)")
    p.add_argument("--strict", action="store_true", help=strict)
    p.add_argument("--json", action="store_true", help="print the claim and its records as JSON")
    p.set_defaults(func=_cmd_show)

    p = sub.add_parser("run", parents=[plugin], help="run claims and store one JSON record per claim")
    p.add_argument("claim_ids", nargs="*", metavar="ID", help="claim ids (`catalogue list` shows them)")
    p.add_argument("--all", action="store_true", help="every registered claim")
    p.add_argument("--family", help="every claim of one family")
    p.add_argument("--spec", metavar="FILE", help="a JSON or TOML spec file: {claim, params, seed}")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="small parameter sets (seconds per claim)")
    mode.add_argument("--full", action="store_true", help="full parameter sets (the default)")
    mode.add_argument(
        "--budget",
        choices=MODES,
        help="quick, full (default) or paper: the source's own budget where it differs from full "
        "(hours; checkpointed, continue with --resume)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="user seed mixed into every derived seed (default 0); given, it runs alone, where full mode otherwise "
        "pools a claim's seeds 0 … k−1",
    )
    p.add_argument(
        "--jobs", type=int, default=1, help="parallel workers, across claims and across a population's models (-1: all)"
    )
    p.add_argument("--backend", choices=["loky", "dask"], default="loky", help="joblib backend for --jobs")
    p.add_argument("--scheduler", metavar="ADDR", help="dask scheduler address (default: a LocalCluster)")
    p.add_argument("--out", default=RECORDS, help=f"records directory (default {RECORDS}/)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="skip claims whose record is current (as `verify` says), continue long training from its checkpoints",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--controls",
        action="store_true",
        help="after each claim, run its negative controls (records <id>~<control>.json)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help=f"exit 1 when a verdict disagrees with its source without a recorded reason, a control does not come "
        f"out as declared, or a verdict differs from the committed record in {RECORDS}/",
    )
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("report", parents=[plugin], help="write REPORT.md (and report/figures/) from the records")
    p.add_argument("--results", default=RECORDS, help=f"records directory (default {RECORDS}/)")
    p.add_argument("--out", default="REPORT.md", help="the report's file (figures go to report/figures beside it)")
    p.add_argument(
        "--readme", metavar="FILE", help="also rewrite the claims table between its markers in FILE (README.md)"
    )
    p.add_argument("--strict", action="store_true", help=strict)
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser(
        "verify",
        parents=[plugin],
        help="check every record (current / stale / edited / invalid); optionally rerun claims and compare numbers",
    )
    p.add_argument("records", nargs="?", metavar="DIR", help="records directory (same as --results)")
    p.add_argument("--results", default=RECORDS, help=f"records directory (default {RECORDS}/)")
    p.add_argument("--rerun", nargs="+", metavar="ID", help="rerun these claims and compare every number")
    p.add_argument("--rerun-sample", type=int, default=0, metavar="K", help="rerun a seeded random sample of K claims")
    p.add_argument("--sample-seed", type=int, default=0, help="seed of --rerun-sample's draw (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="parallel workers for the reruns")
    p.add_argument(
        "--rtol",
        type=float,
        default=0.0,
        help="let a rerun's numbers differ by this relative amount (default 0: the same bits); for another CPU "
        "vendor than the record's, where round-off differs (README: Reproducibility)",
    )
    p.add_argument("--allow-stale", action="store_true", help="stale records are listed but do not fail (CI)")
    p.add_argument("--json", action="store_true", help="print the verification as JSON")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser(
        "score",
        parents=[plugin],
        help="put flatness measures through the catalogue: symmetries, counterexamples, the benchmark populations",
    )
    p.add_argument(
        "measures",
        nargs="+",
        metavar="MEASURE",
        help="a panel measure's name, module:function, path/to/file.py:function or an entry point of "
        "flatness_catalogue.measures; measure(obj, seed) -> float | Estimate, larger = sharper",
    )
    p.add_argument("--quick", action="store_true", help="the quick sizes (a couple of minutes) instead of full")
    p.add_argument("--seed", type=int, default=0, help="user seed (default 0, the seed of the leaderboard)")
    p.add_argument("--jobs", type=int, default=1, help="parallel workers across a population's models (-1: all)")
    p.add_argument("--out", default="scorecard", help="directory for scorecard.md, its figure and one JSON per measure")
    p.add_argument(
        "--records",
        default=None,
        help=f"where the benchmark's stored model rows and weights are read and new ones written (default: "
        f"{RECORDS}/, where both modes' rows are committed)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_score)

    p = sub.add_parser("schema", parents=[plugin], help="JSON Schema of spec files (all claims, or one)")
    p.add_argument("claim_id", nargs="?", help="one claim's schema (default: all)")
    p.set_defaults(func=_cmd_schema)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        _load_plugins(args)
        return args.func(args)
    except UsageError as exc:
        print(f"catalogue: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # unwritable output and the like: one line, not a traceback
        print(f"catalogue: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
