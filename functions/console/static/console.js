// The console's one script (no inline scripts: the Content-Security-Policy allows scripts from the console only).
// Draws the overview's charts with uPlot from the series the server keeps, fetched again every few seconds.
"use strict";

const REFRESH_MS = 3000;

function chartWidth(element) {
  return Math.max(320, element.clientWidth || 600);
}

function axes() {
  // the page's own text colour, so the axes read in dark mode too (uPlot draws them on a canvas)
  const ink = getComputedStyle(document.body).color;
  return [{ stroke: ink }, { stroke: ink }];
}

function drawCharts(rateElement, lagElement, data) {
  const times = data.time;
  const rate = new uPlot(
    {
      width: chartWidth(rateElement),
      height: 240,
      axes: axes(),
      series: [{}, { label: "produced/s", stroke: "#1e88e5" }, { label: "consumed/s", stroke: "#43a047" }],
    },
    [times, data.produced, data.consumed],
    rateElement,
  );
  const lag = new uPlot(
    { width: chartWidth(lagElement), height: 200, axes: axes(), series: [{}, { label: "lag", stroke: "#e53935" }] },
    [times, data.lag],
    lagElement,
  );
  return { rate, lag };
}

function showNow(data) {
  const last = data.time.length - 1;
  document.getElementById("points").textContent = String(data.time.length);
  document.getElementById("produced-now").textContent = last >= 0 ? String(data.produced[last]) : "–";
  document.getElementById("consumed-now").textContent = last >= 0 ? String(data.consumed[last]) : "–";
  if (last >= 0) document.getElementById("lag-now").textContent = String(data.lag[last]);
  if (data.topics !== null) document.getElementById("topic-count").textContent = String(data.topics);
  if (data.groups !== null) document.getElementById("group-count").textContent = String(data.groups);
  document.getElementById("produced-peak").textContent = String(Math.max(0, ...data.produced));
}

async function startCharts() {
  const rateElement = document.getElementById("rate-chart");
  const lagElement = document.getElementById("lag-chart");
  if (!rateElement || typeof uPlot === "undefined") return;
  let charts = null;
  async function refresh() {
    const answer = await fetch(rateElement.dataset.series, { credentials: "same-origin" });
    if (!answer.ok) return;
    const data = await answer.json();
    if (charts === null) {
      charts = drawCharts(rateElement, lagElement, data);
    } else {
      charts.rate.setData([data.time, data.produced, data.consumed]);
      charts.lag.setData([data.time, data.lag]);
    }
    rateElement.dataset.points = String(data.time.length);
    showNow(data);
  }
  await refresh();
  setInterval(refresh, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", startCharts);
