"""`python manage.py run_model`: create and start a model run, or stop or resume one."""

from django.core.management.base import BaseCommand, CommandError

from evaluation.models import Hardware
from submissions.runs.models import Model, Run
from submissions.runs.services import RunError, run_create, run_resume, run_start, run_stop


class Command(BaseCommand):
    help = (
        "Generate kernels with a registered model over problems (a list, a level or a tag); "
        "or --stop / --resume a run. The generation queue must be served: "
        "Q_CLUSTER_NAME=generation Q_WORKERS=<concurrency> python manage.py qcluster"
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--model", help="litellm name of a registered model")
        parser.add_argument("--name", default="", help="a name for the run")
        parser.add_argument("--problem", action="append", dest="problems",
                            help="a problem slug (repeat for several)")
        parser.add_argument("--level", type=int)
        parser.add_argument("--tag")
        parser.add_argument("--hardware", help="hardware slug the kernels are evaluated on")
        parser.add_argument("--backend", default="cuda")
        parser.add_argument("--precision", default="fp32")
        parser.add_argument("--samples", type=int, default=1, help="samples per problem")
        parser.add_argument("--temperature", type=float, default=0.0)
        parser.add_argument("--prompt-style", default=Run.PromptStyle.ONE_SHOT,
                            choices=Run.PromptStyle.values)
        parser.add_argument("--refinement-turns", type=int, default=0)
        parser.add_argument("--no-start", action="store_true", help="create it pending")
        parser.add_argument("--stop", type=int, metavar="RUN_ID")
        parser.add_argument("--resume", type=int, metavar="RUN_ID")

    def handle(self, *args, **options) -> None:
        try:
            if options["stop"] or options["resume"]:
                run = self._steer(options)
            else:
                run = self._create(options)
        except RunError as error:
            allowed = f" Allowed: {', '.join(error.allowed)}." if error.allowed else ""
            raise CommandError(f"{error.message}{allowed}") from None
        self.stdout.write(
            f"run {run.pk} ({run.name}) is {run.status}: {run.problems.count()} problems, "
            f"{run.samples_per_problem} sample(s) each, page /runs/{run.pk}/"
        )

    def _steer(self, options) -> Run:
        pk = options["stop"] or options["resume"]
        run = Run.objects.filter(pk=pk).first()
        if run is None:
            raise CommandError(f"There is no run {pk}.")
        return run_stop(run=run) if options["stop"] else run_resume(run=run)

    def _create(self, options) -> Run:
        if not options["model"] or not options["hardware"]:
            raise CommandError("--model and --hardware are required to create a run.")
        model = Model.objects.filter(litellm_name=options["model"]).first()
        if model is None:
            known = ", ".join(Model.objects.values_list("litellm_name", flat=True)) or "none"
            raise CommandError(
                f"No model {options['model']!r} is registered (known: {known}); "
                "register it in the admin first."
            )
        hardware = Hardware.objects.filter(slug=options["hardware"]).first()
        if hardware is None:
            known = ", ".join(Hardware.objects.values_list("slug", flat=True)) or "none"
            raise CommandError(f"No hardware {options['hardware']!r} (known: {known}).")
        run = run_create(
            model=model,
            name=options["name"],
            problems=options["problems"],
            level=options["level"],
            tag=options["tag"],
            backend=options["backend"],
            hardware=hardware,
            precision=options["precision"],
            samples_per_problem=options["samples"],
            temperature=options["temperature"],
            prompt_style=options["prompt_style"],
            refinement_turns=options["refinement_turns"],
        )
        return run if options["no_start"] else run_start(run=run)
