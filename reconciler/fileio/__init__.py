"""Every file the tool reads or writes goes through here: one input opener, one output writer.

* :mod:`reconciler.fileio.reading` — :func:`~reconciler.fileio.reading.read_input`: regular files
  only (a FIFO, device, socket or directory is refused before it is read, so nothing hangs on a
  pipe nobody writes or reads ``/dev/zero`` until memory runs out), ``-`` for stdin only where a
  caller allows it, the size capped before reading, the option (or the file) named in the error;
* :mod:`reconciler.fileio.writing` — :func:`~reconciler.fileio.writing.prepare_output` checks an
  output before any work (name length, directory, space for a first byte, not one of the
  command's inputs) and :class:`~reconciler.fileio.writing.Output` writes it as a careful Unix
  tool does: a regular file replaced atomically, a character device or FIFO written in place,
  anything else refused with the option named.

Layer: below ``load`` (which reads through it) and above ``ports``; it imports only
:mod:`reconciler.errors`.
"""
