#pragma once
// Reading a child process's output a line at a time as it arrives (the lab's jobs that run
// `parlab` and show its progress lines).
#include <QByteArray>
#include <QList>

namespace parlab::gui {

// The complete lines at the front of `buffer` (without their '\n'), removed from it; a partial
// last line stays for the next read.
inline QList<QByteArray> take_lines(QByteArray& buffer) {
  QList<QByteArray> lines;
  int nl;
  while ((nl = buffer.indexOf('\n')) >= 0) {
    lines.push_back(buffer.left(nl));
    buffer.remove(0, nl + 1);
  }
  return lines;
}

}  // namespace parlab::gui
