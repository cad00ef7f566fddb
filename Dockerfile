# mpigraph on Debian bookworm with Python 3.11, the mpich wheel and Debian's
# MPICH + gfortran.  The steps are .ci/run's, the script CI runs natively.
#
#   docker build -t mpigraph .
#   docker run --rm --shm-size=1g mpigraph          # the test suite
#   docker run --rm --shm-size=1g mpigraph mpigraph demo
FROM python:3.11-slim-bookworm

WORKDIR /src
COPY . /src
RUN bash .ci/run install

CMD ["bash", ".ci/run", "test"]
