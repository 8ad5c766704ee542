"""GET /api/v1/problems/<slug>/starter/?backend=triton: a working kernel to start from.

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
from problems.starters import BACKENDS, StarterError, starter_source


class ProblemStarterApi(ApiMixin, APIView):
    @extend_schema(
        operation_id="problems_starter",
        parameters=[
            OpenApiParameter(
                "backend",
                required=True,
                enum=list(BACKENDS),
                description="The backend to start in.",
            )
        ],
        responses={
            200: inline_serializer(
                "Starter",
                {
                    "problem": serializers.CharField(),
                    "backend": serializers.CharField(),
                    "filename": serializers.CharField(),
                    "source": serializers.CharField(
                        help_text="A ModelNew that the judge finds correct as it is: the "
                        "reference's ops, and for CUDA, Triton and C++ an elementwise kernel "
                        "of that backend that passes each output through, to edit."
                    ),
                },
            ),
            **BAD_REQUEST,
            **NOT_FOUND,
            **ERRORS,
        },
        description="A working kernel for the problem in the backend, to edit and submit. It "
        "contains the reference, so it is given where the reference is (its code public, or "
        "staff).",
    )
    def get(self, request, problem_slug: str) -> Response:
        slug = problem_slug
        problem = (
            Problem.objects.visible_to(request.user)
            .select_related("current_version")
            .filter(slug=slug)
            .first()
        )
        if problem is None:
            raise exceptions.NotFound(f"There is no problem {slug}.")
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
                "problem": problem.slug,
                "backend": backend,
                "filename": f"{problem.slug.replace('/', '_')}_{backend}.py",
                "source": source,
            }
        )
