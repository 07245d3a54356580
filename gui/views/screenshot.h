#pragma once
// `parlab-lab --screenshot DIR`: every view rendered offscreen to DIR/<view>.png (at least
// 1280x800), after the work it shows (planner search, simulations) has finished.
#include <QString>
#include <functional>

namespace parlab::gui {

class MainWindow;

// Returns the number of views that could not be written (0: all).
int take_screenshots(MainWindow& window, const QString& dir, int width = 1440, int height = 900);

// Runs the event loop until `done` or `timeout_ms` passes; returns done().
bool wait_until(const std::function<bool()>& done, int timeout_ms);

}  // namespace parlab::gui
