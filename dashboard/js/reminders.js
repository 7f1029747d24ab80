// A clinic's reminders, as a section of the Clinic view: on or off, a call or a text, how
// many hours before the appointment, and which appointment types (none ticked: every
// type). Saved whole with PUT /api/clinics/{id}/reminders (an admin); a refusal is shown
// by the form.

import { api } from "./api.js";
import { el, say } from "./dom.js";

/** The section for clinic `clinicId`, whose live appointment types are `typeNames`;
 * `canWrite`: the key may change it (else the controls are disabled). */
export function remindersSection(clinicId, typeNames, canWrite) {
  const path = `/api/clinics/${encodeURIComponent(clinicId)}/reminders`;
  const body = el("div", { id: "reminders-body" }, el("p", { class: "muted" }, "Loading…"));
  const section = el("section", { id: "clinic-reminders", "aria-labelledby": "clinic-reminders-title" },
    el("h2", { id: "clinic-reminders-title" }, "Reminders"),
    el("p", { class: "muted" }, "Patients with a booking get a call this long before it, to "
      + "confirm, cancel or move it, or a text from the clinic's number."),
    body);

  function form(campaign, status) {
    const chosen = new Set((campaign.appointment_types ?? []).map((t) => t.name));
    const enabled = el("input", { id: "reminders-enabled", type: "checkbox",
      checked: campaign.enabled, disabled: !canWrite });
    const channel = el("select", { id: "reminders-channel", disabled: !canWrite },
      [["call", "A call"], ["text", "A text"]].map(([value, label]) =>
        el("option", { value, selected: campaign.channel === value }, label)));
    const lead = el("input", { id: "reminders-lead", type: "number", min: 1, max: 336, step: 1,
      value: campaign.lead_hours, required: true, disabled: !canWrite });
    const names = [...new Set([...typeNames, ...chosen])];
    const boxes = names.map((name, i) => el("input", { type: "checkbox", id: `reminders-type-${i}`,
      name: "reminder-types", value: name, checked: chosen.has(name), disabled: !canWrite }));
    const problems = el("div", { id: "reminders-status", "aria-live": "polite" }, status);
    const save = el("button", { type: "submit", id: "reminders-save", disabled: !canWrite }, "Save");
    const node = el("form", { id: "reminders-form", class: "editor" },
      el("label", { class: "check", for: "reminders-enabled" }, enabled,
        " Remind patients before their appointments"),
      el("div", { class: "field" }, el("label", { for: "reminders-channel" }, "By"), channel),
      el("div", { class: "field" }, el("label", { for: "reminders-lead" },
        "Hours before the appointment (1–336)"), lead),
      el("fieldset", { class: "field checks" },
        el("legend", {}, "Appointment types (none ticked: every type)"),
        boxes.map((box, i) => el("label", { class: "check", for: box.id }, box, ` ${names[i]}`))),
      el("div", { class: "actions" }, save), problems);
    node.addEventListener("submit", async (event) => {
      event.preventDefault();
      save.disabled = true;
      try {
        const saved = await api(path, { method: "PUT", body: {
          enabled: enabled.checked, channel: channel.value, lead_hours: Number(lead.value),
          appointment_types: boxes.filter((b) => b.checked).map((b) => b.value) } });
        body.replaceChildren(form(saved, el("p", { class: "notice info", role: "status" },
          saved.enabled ? `Saved: reminder ${saved.channel}s ${saved.lead_hours} hours ahead.`
            : "Saved: no reminders.")));
      } catch (error) {
        const fields = Array.isArray(error.detail) ? error.detail.map((d) => d.msg).join("; ") : "";
        say(problems, fields || error.message, "error");
        save.disabled = !canWrite;
      }
    });
    return node;
  }

  api(path).then((campaign) => body.replaceChildren(form(campaign, null)))
    .catch((error) => say(body, error.message, "error"));
  return section;
}
