"""The text an entity is embedded as: what a search for it would say."""

from __future__ import annotations

from db.world import PatientRecord


def patient_document(record: PatientRecord) -> str:
    """Demographics in words (no clinical details: the record, not the chart)."""
    parts = [f"{record.full_name}.", f"Born {record.date_of_birth.isoformat()}."]
    if record.phone:
        parts.append(f"Phone {record.phone}.")
    if record.email:
        parts.append(f"Email {record.email}.")
    if record.address:
        parts.append(f"Lives at {record.address}.")
    if record.mrn:
        parts.append(f"MRN {record.mrn}.")
    return " ".join(parts)
