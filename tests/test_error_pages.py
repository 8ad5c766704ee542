"""The 404 and 500 pages are the site's own, in its layout."""

import pytest
from django.test import Client
from django.urls import path

from kbsite.urls import urlpatterns as site_urlpatterns

pytestmark = pytest.mark.django_db


def broken(request):
    raise RuntimeError("boom")


urlpatterns = [*site_urlpatterns, path("boom/", broken)]


def test_it_answers_an_unknown_page_with_the_sites_404_page():
    response = Client().get("/no-such-page/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "<h1>Not found</h1>" in page
    assert 'class="brand"' in page and "Problems</a>" in page  # the base template's header


def test_it_answers_a_server_error_with_the_sites_500_page(settings):
    settings.ROOT_URLCONF = __name__
    response = Client(raise_request_exception=False).get("/boom/")
    assert response.status_code == 500
    page = response.content.decode()
    assert "<h1>Server error</h1>" in page and 'class="brand"' in page
    assert "boom" not in page.replace('class="brand"', "")  # nothing of the error itself
