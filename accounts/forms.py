from django import forms
from django.contrib.auth.forms import UserCreationForm

from accounts.models import ApiToken


class SignupForm(UserCreationForm):
    pass


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
