from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

from accounts.models import ApiToken
from accounts.services import email_verification_required


class SignupForm(UserCreationForm):
    """Username and password; and an email address when the site verifies them
    (ACCOUNT_EMAIL_VERIFICATION), so that one address makes one account."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if email_verification_required():
            self.fields["email"] = forms.EmailField(
                max_length=254,
                help_text="We send a link there: you can submit once you have followed it.",
            )
            self.order_fields(["username", "email"])

    def clean_email(self) -> str:
        email = self.cleaned_data["email"]
        if get_user_model().objects.filter(email__iexact=email).exists():
            raise forms.ValidationError("An account with this email address exists already.")
        return email


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, required=False, help_text="To tell your tokens apart, e.g. 'my agent'."
    )
    scopes = forms.MultipleChoiceField(
        choices=ApiToken.Scope.choices,
        initial=[ApiToken.Scope.READ, ApiToken.Scope.SUBMIT],
        widget=forms.CheckboxSelectMultiple,
        help_text="read: problems, hardware, your submissions; submit: new submissions.",
    )
