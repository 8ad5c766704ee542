"""Input and output serializers of the API's token endpoints (/api/v1/tokens/)."""

from rest_framework import serializers

from accounts.models import ApiToken


class TokenInputSerializer(serializers.Serializer):
    name = serializers.CharField(
        required=False, allow_blank=True, max_length=100,
        help_text="To tell your tokens apart, e.g. 'my agent'.",
    )
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=ApiToken.Scope.choices),
        required=False,
        allow_empty=False,
        help_text="read: problems, hardware, your submissions; submit: new submissions. Both "
        "when left out. A token can only make tokens with scopes it has itself.",
    )


class TokenSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The key's first characters, to recognize it.")
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=ApiToken.Scope.choices))
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)


class TokenCreatedSerializer(TokenSerializer):
    key = serializers.CharField(
        help_text="The key, shown this once (only its hash is stored). Send it as "
        "`Authorization: Bearer KEY`."
    )
