// replaykit view: sortable tables, expand/collapse, and polling for a store being recorded.
// No library, no build step, nothing fetched but this server's own pages.
"use strict";

function cellValue(row, index) {
  const cell = row.children[index];
  if (!cell) return "";
  const raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
  const num = parseFloat(raw);
  return raw !== "" && !isNaN(num) && /^[-+]?[0-9.]/.test(raw) ? num : raw.toLowerCase();
}

function initSortable(root) {
  root.querySelectorAll("table.sortable").forEach((table) => {
    table.querySelectorAll("thead th").forEach((th, index) => {
      th.title = (th.title ? th.title + " " : "") + "(click to sort)";
      th.addEventListener("click", () => {
        const body = table.tBodies[0];
        const asc = !th.classList.contains("sorted-asc");
        table.querySelectorAll("thead th").forEach((h) => h.classList.remove("sorted-asc", "sorted-desc"));
        th.classList.add(asc ? "sorted-asc" : "sorted-desc");
        const rows = Array.from(body.rows);
        rows.sort((a, b) => {
          const x = cellValue(a, index), y = cellValue(b, index);
          return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
        });
        rows.forEach((r) => body.appendChild(r));
      });
    });
  });
}

function initToggles(root) {
  root.querySelectorAll("button.toggle-all").forEach((button) => {
    button.addEventListener("click", () => {
      const open = button.dataset.open === "1";
      document.querySelectorAll("#transcript details.tool-output").forEach((d) => { d.open = open; });
    });
  });
}

function init(root) { initSortable(root); initToggles(root); }

async function poll() {
  const body = document.body;
  try {
    const answer = await fetch("/api/token", { cache: "no-store" });
    const { token } = await answer.json();
    if (token !== body.dataset.token) {
      const page = await fetch(location.href, { cache: "no-store" });
      const doc = new DOMParser().parseFromString(await page.text(), "text/html");
      const fresh = doc.getElementById("main");
      const open = Array.from(document.querySelectorAll("details[open]"), (d) => d.id).filter(Boolean);
      if (fresh) {
        document.getElementById("main").replaceWith(fresh);
        open.forEach((id) => { const d = document.getElementById(id); if (d) d.open = true; });
        init(fresh);
      }
      body.dataset.token = doc.body.dataset.token || token;
    }
  } catch (err) {
    // the viewer was stopped or is busy: try again at the next tick
  }
  setTimeout(poll, parseInt(body.dataset.poll || "2000", 10));
}

document.addEventListener("DOMContentLoaded", () => {
  init(document);
  if (parseInt(document.body.dataset.poll || "0", 10) > 0) setTimeout(poll, parseInt(document.body.dataset.poll, 10));
});
