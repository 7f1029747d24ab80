"""What each call feature is tuned with: the call itself, turn-taking, the conversation's
observers, safety, emotion and the world model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from config.group import CommaList, SettingsGroup


class CrisisResource(BaseModel):
    """A crisis line the operator has verified for their callers (never made up)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=2, max_length=80)
    phone: str = Field(pattern=r"^\+?[0-9]{3,15}$")


# Engineering-level fallback vocabulary: the last keyterm layer, after the service's and


# the workspace's own.


DEFAULT_SYSTEM_KEYTERMS = (
    "appointment",
    "reschedule",
    "cancel",
    "doctor",
    "clinic",
    "insurance",
    "prescription",
    "date of birth",
)


class CallSettings(SettingsGroup):
    """What every call runs with, and how long it may last."""

    context_graph: str = Field(
        default="clinic_booking",
        description="Bundled graph (flows/graphs/<name>.yaml) a service runs when none is stored.",
    )
    system_keyterms: CommaList[str] = Field(default_factory=lambda: list(DEFAULT_SYSTEM_KEYTERMS))
    max_call_duration_s: float = Field(default=1800.0, gt=0)
    idle_timeout_s: float = Field(
        default=300.0, gt=0, description="End a call after this long with no speech at all."
    )


class TurnSettings(SettingsGroup):
    """When the caller's turn ends, and how long a turn may wait for its answer."""

    turn_max_silence_s: float = Field(
        default=1.5, gt=0, le=5,
        description="Longest silence before a turn the end-of-turn model thinks unfinished "
        "is ended anyway (Pipecat's default is 3 s: too much dead air for short answers).",
    )
    deferred_turn_max_age_s: float = Field(
        default=8.0, gt=0, le=60,
        description="A short answer the caller says while the agent is still talking "
        "(\"yes\", \"Tuesday\") is answered once the agent has finished, unless it is "
        "older than this by then.",
    )
    reply_watchdog_s: float = Field(
        default=4.0, gt=0, le=30,
        description="A caller turn whose answer is not heard this long after it was handed "
        "to the agent gets one retry; as long again without it, a short fallback line "
        "(never silence). Paused while a tool runs.",
    )


class ConversationSettings(SettingsGroup):
    """The conversation's observers: the director, the goodbye and the silence check-ins."""

    director_timeout_s: float = Field(
        default=3.0, gt=0, le=10,
        description="Longest wait for the director's analysis of one turn (off the voice "
        "path: a late analysis only means no guidance).",
    )
    director_wind_down_s: float = Field(
        default=540.0, gt=0,
        description="Call time after which the director asks the agent to wind down (9 min).",
    )
    director_force_end_s: float = Field(
        default=720.0, gt=0,
        description="The call's time limit (12 min): the director then does what the "
        "context graph's `time_limit` says (escalate to a person, offer a call back, or end "
        "with a short closing line), unless a goodbye is under way or a human has the call.",
    )
    director_closing_end_s: float = Field(
        default=480.0, gt=0,
        description="When the director sees the call closing after this long (8 min), the "
        "call ends 5 s later.",
    )
    goodbye_delay_s: float = Field(
        default=3.5, gt=0, le=30,
        description="After a caller's strong goodbye, the call ends this much later unless "
        "they keep talking (the agent's own goodbye plays meanwhile).",
    )
    silence_checkins_s: CommaList[float] = Field(
        default_factory=lambda: [10.0, 20.0, 40.0],
        description="Seconds of caller silence before each check-in ('Are you still "
        "there?'), comma-separated.",
    )
    silence_goodbye_after_s: float = Field(
        default=10.0, gt=0,
        description="Silence after the last check-in before the agent says goodbye and hangs up.",
    )

    @field_validator("silence_checkins_s")
    @classmethod
    def _checkins_positive(cls, value: list[float]) -> list[float]:
        if not value or any(v <= 0 for v in value):
            raise ValueError("SILENCE_CHECKINS_S needs at least one positive number of seconds")
        return value

    @model_validator(mode="after")
    def _director_times_in_order(self) -> ConversationSettings:
        if self.director_wind_down_s >= self.director_force_end_s:
            raise ValueError("DIRECTOR_WIND_DOWN_S must be less than DIRECTOR_FORCE_END_S")
        return self


class SafetySettings(SettingsGroup):
    """When a caller's words escalate, and what the agent tells a caller in danger."""

    escalate_similarity: float = Field(
        default=0.85, gt=0, le=1, validation_alias="safety_escalate_similarity",
        description="A caller turn this similar to a safety concept escalates at once, "
        "without waiting for the judge (so safety holds when the judge is down).",
    )
    candidate_similarity: float = Field(
        default=0.45, gt=0, le=1, validation_alias="safety_candidate_similarity",
        description="From this similarity a turn goes to the judge, which confirms or not.",
    )
    judge_timeout_s: float = Field(
        default=3.0, gt=0, le=10, validation_alias="safety_judge_timeout_s"
    )
    emergency_number: str = Field(
        default="911", pattern=r"^[0-9]{2,4}$",
        description="The local emergency number the agent tells a caller in danger to call "
        "(set it for your country, e.g. 000, 112, 999). The agent never says any other.",
    )
    crisis_resources: list[CrisisResource] = Field(
        default_factory=list,
        description="Crisis lines you have verified for your callers, as JSON: "
        '[{"name": "...", "phone": "..."}]. Unset: the agent says it cannot verify one '
        "and a person from the team takes over.",
    )

    @model_validator(mode="after")
    def _similarities_in_order(self) -> SafetySettings:
        if self.candidate_similarity > self.escalate_similarity:
            raise ValueError("SAFETY_CANDIDATE_SIMILARITY must not exceed "
                             "SAFETY_ESCALATE_SIMILARITY")
        return self


class EmotionSettings(SettingsGroup):
    """How long the caller's emotion may take to read."""

    text_timeout_s: float = Field(
        default=2.5, gt=0, le=10, validation_alias="emotion_text_timeout_s",
        description="Longest wait for the fast model to score one caller transcript.",
    )


class WorldSettings(SettingsGroup):
    """The world model: facts taken from each turn, checks by ear, the after-call judges."""

    extraction_timeout_s: float = Field(default=3.0, gt=0, le=30)
    verification_timeout_s: float = Field(
        default=20.0, gt=0, le=300,
        description="Each model stage of the after-call verification (then the rules judge).")
    analysis_timeout_s: float = Field(
        default=30.0, gt=0, le=300,
        description="The fast model's after-call analysis of one call (summary, quality "
        "score): past it, the rules' analysis stands, marked as such.")
    audio_verification_timeout_s: float = Field(
        default=2.5, gt=0, le=10,
        description="How long a caller waits for an audio check before the call goes on "
        "with the transcript as heard.")
    phone_country_code: str = Field(
        default="1", pattern=r"^[1-9][0-9]{0,2}$",
        description="Country code for phone numbers callers say without one (1: North "
        "American numbering).")

