"""GET /api/v1/problems/<slug>/starter/?backend=triton: a working kernel to start from. The
problem is named as in every problem route (problems.selectors): its slug, level1/19_ReLU/, or
its level and number, level1/19/ or 1/19/.

The text comes from problems.starters (the one renderer, which the submit page and the
competition entry form use too); this view only says who may have it. Kept apart from api.py so
that the problems API stays as it is.
"""

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api import ApiMixin
from kbsite.api_errors import BAD_REQUEST, ERRORS, NOT_FOUND, error_body
from problems.models import Problem
from problems.selectors import asked_name, problem_by_name
from problems.starters import BACKENDS, StarterError, starter_source
from submissions.api import PROBLEM_NAME

STARTER = inline_serializer(
    "Starter",
    {
        "problem": serializers.CharField(),
        "backend": serializers.CharField(),
        "filename": serializers.CharField(),
        "source": serializers.CharField(
            help_text="A ModelNew that the judge finds correct as it is: the reference's ops, "
            "and for CUDA, Triton and C++ an elementwise kernel of that backend that passes each "
            "output through, to edit."
        ),
    },
)
BACKEND = OpenApiParameter(
    "backend", required=True, enum=list(BACKENDS), description="The backend to start in."
)


class ProblemStarterApi(ApiMixin, APIView):
    @extend_schema(
        operation_id="problems_starter",
        parameters=[BACKEND, *PROBLEM_NAME],
        responses={200: STARTER, **BAD_REQUEST, **NOT_FOUND, **ERRORS},
        description="A working kernel for the problem in the backend, to edit and submit. It "
        "contains the reference, so it is given where the reference is (its code public, or "
        "staff). The problem by its slug (`level1/19_ReLU/starter/`), or by level and number "
        "(`level1/19/starter/`, `1/19/starter/`).",
    )
    def get(
        self, request, level: int, name: str = "", number: int | None = None
    ) -> Response:
        problem = problem_by_name(
            Problem.objects.visible_to(request.user).select_related("current_version"),
            level=level,
            name=name,
            number=number,
        )
        if problem is None:
            asked = asked_name(level=level, name=name, number=number)
            raise exceptions.NotFound(f"There is no problem {asked}.")
        slug = problem.slug
        if not problem.reference_visible_to(request.user):
            raise exceptions.PermissionDenied(
                f"The reference of {slug} is not public yet, and a starter contains it."
            )
        backend = request.query_params.get("backend", "")
        try:
            source = starter_source(problem=problem, backend=backend)
        except StarterError as error:
            allowed = list(BACKENDS) if error.code == "unknown_backend" else None
            return Response(error_body(error.message, error.code, allowed=allowed), status=400)
        return Response(
            {
                "problem": slug,
                "backend": backend,
                "filename": f"{slug.replace('/', '_')}_{backend}.py",
                "source": source,
            }
        )


class ProblemStarterByNumberApi(ProblemStarterApi):
    """The same at /api/v1/problems/<level>/<number>/starter/, its own operation in the schema."""

    @extend_schema(
        operation_id="problems_starter_by_number",
        parameters=[BACKEND],
        responses={200: STARTER, **BAD_REQUEST, **NOT_FOUND, **ERRORS},
        description="A problem's starter by its level and number; the same as by its slug.",
    )
    def get(self, request, level: int, number: int) -> Response:
        return super().get(request, level=level, number=number)
