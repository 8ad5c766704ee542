"""Problem descriptions and tags: read from a reference's docstring and its name when problems
are imported or the samples loaded (problems.importing.short_description, name_tags), and shown
on the problem list and each problem's page."""

import pytest
from django.test import Client

from problems.importing import DESCRIPTION_MAX_CHARS, name_tags, short_description
from problems.models import Problem
from problems.services import problems_import, samples_load

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Simple model that performs a ReLU activation
    on its input.

    Args:
        x: the input tensor.
    """

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
'''


def test_the_description_is_the_docstrings_first_paragraph_on_one_line():
    assert short_description(
        "\n  Simple model that performs a ReLU activation\n  on its input.\n\n  More.\n"
    ) == "Simple model that performs a ReLU activation on its input."
    assert short_description("Performs a matmul.\n    Args:\n        A: a matrix.") == (
        "Performs a matmul."
    )
    assert short_description("") == ""
    long = short_description("word " * 200)
    assert len(long) <= DESCRIPTION_MAX_CHARS and long.endswith("…")


@pytest.mark.parametrize(
    ("name", "tags"),
    [
        ("ReLU", ["activation"]),
        ("Square_matrix_multiplication_", ["matmul"]),
        ("Conv3d_GroupNorm_Mean_Softplus", ["activation", "convolution", "normalization",
                                            "reduction"]),
        ("Max_Pooling_2D", ["pooling"]),
        ("Gemm_Sigmoid_Sum_LogSumExp", ["activation", "matmul", "reduction"]),
        ("CrossEntropyLoss", ["loss"]),
        ("Something_else", []),
    ],
)
def test_tags_say_what_kinds_of_operations_the_name_has(name, tags):
    assert name_tags(name) == tags


@pytest.mark.django_db
def test_an_imported_problem_gets_its_description_and_tags(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "19_ReLU.py").write_text(REFERENCE)

    problems_import(path=tmp_path, tags=["kernelbench"], publish=False)

    problem = Problem.objects.get(slug="level1/19_ReLU")
    assert problem.description == "Simple model that performs a ReLU activation on its input."
    assert sorted(t.name for t in problem.tags.all()) == ["activation", "kernelbench"]


@pytest.mark.django_db
def test_the_samples_come_with_descriptions_and_tags():
    problems = {outcome.problem.slug: outcome.problem for outcome in samples_load()}
    relu = problems["level1/901_Small_ReLU"]
    assert relu.description.startswith("ReLU on a small matrix")
    assert [t.name for t in relu.tags.all()] == ["activation"]
    assert all(p.description for p in problems.values())
    assert all(p.tags.exists() for p in problems.values())


@pytest.mark.django_db
def test_the_list_and_the_problem_page_show_them_and_a_tag_finds_its_problems(client: Client):
    samples_load()

    listing = client.get("/problems/").content.decode()
    relu_row = listing.split('href="/problems/level1/901_Small_ReLU/"')[1].split("</tr>")[0]
    assert "ReLU on a small matrix" in relu_row
    assert '<a class="tag" href="?q=activation"' in relu_row

    tagged = client.get("/problems/?q=matmul")
    assert sorted(row["problem"].slug for row in tagged.context["rows"]) == [
        "level1/902_Small_Matmul", "level2/901_Small_Linear_GELU",
    ]

    detail = client.get("/problems/1/901/").content.decode()
    assert 'id="problem-description">ReLU on a small matrix' in detail
    assert 'href="/problems/?q=activation"' in detail
