"""Account pages under /accounts/: sign up, email verification, the profile page and its API
tokens (log in and out are django.contrib.auth's)."""

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST, require_safe

from accounts.forms import SignupForm, TokenForm
from accounts.models import ApiToken
from accounts.services import (
    TokenError,
    VerificationError,
    api_token_create,
    api_token_revoke,
    email_verification_send,
    email_verification_state,
    email_verify,
    signup_create,
)
from accounts.throttling import SignupThrottled, client_address, signup_throttle_check


def _signup_page(request, form: SignupForm, *, status: int = 200, retry_after: int = 0):
    response = render(request, "registration/signup.html", {"form": form}, status=status)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


def signup(request):
    if request.method != "POST":
        return _signup_page(request, SignupForm())
    # Bound even when the body is empty, so that a refusal can be added to it.
    form = SignupForm(request.POST)
    address = client_address(request)
    try:
        # Before the form's checks, so a throttled client gets its answer first, whatever it
        # typed; signup_create counts again under a lock.
        signup_throttle_check(address=address)
        if not form.is_valid():
            return _signup_page(request, form)
        user = signup_create(
            username=form.cleaned_data["username"],
            password=form.cleaned_data["password1"],
            email=form.cleaned_data.get("email", ""),
            address=address,
            site_url=request.build_absolute_uri("/"),
        )
    except SignupThrottled as error:
        form.add_error(None, error.message)
        return _signup_page(request, form, status=429, retry_after=error.retry_after)
    except IntegrityError:
        # The form saw the name free; another sign-up took it since.
        form.add_error("username", "A user with that username already exists.")
        return _signup_page(request, form)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    messages.success(request, f"Welcome, {user.username}.")
    if email_verification_state(user=user) is not None:
        messages.info(
            request,
            f"We sent a link to {user.email}: follow it and you can submit kernels.",
        )
    return redirect("profile")


def _profile(request, *, form: TokenForm, new_key: str = "", status: int = 200):
    # The page's quotas are the submissions app's: its template reads them through
    # submissions_tags.user_quota.
    tokens = ApiToken.objects.filter(user=request.user)
    return render(
        request,
        "accounts/profile.html",
        {
            "tokens": tokens,
            "form": form,
            "new_key": new_key,
            "email_state": email_verification_state(user=request.user),
        },
        status=status,
    )


@never_cache
@login_required
def profile(request):
    return _profile(request, form=TokenForm())


@never_cache
@login_required
@require_POST
def token_create(request):
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _profile(request, form=form, status=400)
    try:
        token, key = api_token_create(
            user=request.user, name=form.cleaned_data["name"], scopes=form.cleaned_data["scopes"]
        )
    except TokenError as error:
        form.add_error("scopes", error.message)
        return _profile(request, form=form, status=400)
    # Rendered here, never stored or redirected with: the key is shown this once.
    return _profile(request, form=TokenForm(), new_key=key)


@login_required
@require_POST
def token_revoke(request, pk: int):
    try:
        token = api_token_revoke(user=request.user, token_id=pk)
    except ApiToken.DoesNotExist:
        return render(request, "accounts/token_missing.html", status=404)
    messages.success(request, f"Token {token.prefix}… is revoked.")
    return redirect("profile")


@never_cache
@require_safe
def verify_email(request, token: str):
    """The link of the verification email; it works without a login (often another browser)."""
    try:
        user = email_verify(token=token)
    except VerificationError as error:
        return render(request, "accounts/email_verify.html", {"error": error.message}, status=400)
    return render(request, "accounts/email_verify.html", {"verified_user": user})


@login_required
@require_POST
def verification_resend(request):
    try:
        verification = email_verification_send(
            user=request.user, site_url=request.build_absolute_uri("/")
        )
    except VerificationError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"A new link is on its way to {verification.email}.")
    return redirect("profile")
