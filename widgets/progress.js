// Progress: a bar with count, percentage, elapsed time, rate and time left.

function clock(seconds) {
  if (!Number.isFinite(seconds)) return "?";
  const s = Math.round(seconds);
  const hours = Math.floor(s / 3600);
  const mm = String(Math.floor((s % 3600) / 60)).padStart(2, "0");
  const ss = String(s % 60).padStart(2, "0");
  return hours ? `${hours}:${mm}:${ss}` : `${mm}:${ss}`;
}

function render({ model, el }) {
  const label = h("span", { class: "uac-progress-label" });
  const fill = h("div", { class: "uac-progress-fill" });
  const bar = h(
    "div",
    { class: "uac-progress-bar", role: "progressbar", "aria-valuemin": "0" },
    fill,
  );
  const info = h("span", { class: "uac-progress-info" });
  const root = h("div", { class: "uac uac-progress" }, label, bar, info);
  el.replaceChildren(root);

  function draw() {
    const value = model.get("value");
    const total = model.get("total");
    const elapsed = model.get("elapsed");
    const state = model.get("status");
    const description = model.get("description");
    label.textContent = description;
    bar.setAttribute("aria-label", description || "progress");
    root.dataset.status = state;
    const rate = elapsed > 0 ? value / elapsed : 0;
    let text = `${count(value)}`;
    if (total !== null && total !== undefined && total > 0) {
      const share = Math.min(1, value / total);
      fill.style.width = `${(share * 100).toFixed(1)}%`;
      bar.setAttribute("aria-valuemax", String(total));
      bar.setAttribute("aria-valuenow", String(value));
      text = `${Math.floor(share * 100)}% ${count(value)}/${count(total)}`;
      if (state === "running" && rate > 0) text += ` · ${clock((total - value) / rate)} left`;
    } else {
      fill.style.width = state === "running" ? "" : "100%";
      bar.removeAttribute("aria-valuenow");
      root.classList.toggle("uac-progress-open", state === "running");
    }
    text += ` · ${clock(elapsed)}`;
    if (rate > 0) text += ` · ${rate >= 10 ? Math.round(rate) : rate.toFixed(1)}/s`;
    if (state !== "running") text += ` · ${state}`;
    info.textContent = text;
  }

  draw();
  return listen(model, ["value", "total", "elapsed", "status", "description"], draw);
}

export default { render };
