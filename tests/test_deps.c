/* The dependency probe of the Makefile (tools/deps.sh) against compilers that cannot see the
 * headers: it must name exactly the missing Debian packages, run the install through $APT as root
 * (APT=echo prints it), name the apt-get line to anyone else, and fail either way. */
#include <unistd.h>

#include "shell.h"
#include "test.h"

/* make as a user types it, not as a child of the make running the tests */
#define MAKE_CHECK_DEPS "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory check-deps APT=echo"
/* the packages whose headers a compiler without its include paths cannot see */
#define BUILD_PACKAGES "libopenblas-openmp-dev libstb-dev libcjson-dev libopenmpi-dev"

TEST(deps_probe_reports_every_package_missing_without_headers) {
    char out[8192];
    int code = run(out, sizeof(out), MAKE_CHECK_DEPS " CC='gcc -nostdinc'");
    EXPECT(code != 0, "exit 0:\n%s", out);
    EXPECT(strstr(out, "missing Debian packages: " BUILD_PACKAGES "\n"), "output:\n%s", out);
    if (geteuid() == 0)
        EXPECT(strstr(out, "\nupdate -qq\ninstall -y -qq " BUILD_PACKAGES "\n") &&
                   strstr(out, "still missing after the install: " BUILD_PACKAGES),
               "as root the install runs through APT (echo), then the probe fails again:\n%s", out);
    else
        EXPECT(strstr(out, "run as root: apt-get install -y " BUILD_PACKAGES "\n") && !strstr(out, "update -qq"),
               "output:\n%s", out);
}

TEST(deps_probe_names_only_the_package_whose_header_fails) {
    char out[8192], dir[64];
    snprintf(dir, sizeof(dir), "/tmp/vitc_deps_%d", (int)getpid());
    int code = run(out, sizeof(out), "mkdir -p %s/cjson && echo '#error not this cJSON' > %s/cjson/cJSON.h", dir, dir);
    EXPECT(code == 0, "%s", out);
    code = run(out, sizeof(out), MAKE_CHECK_DEPS " CC='gcc -I%s'", dir);
    char cleanup[128];
    run(cleanup, sizeof(cleanup), "rm -rf %s", dir);
    EXPECT(code != 0 && strstr(out, "missing Debian packages: libcjson-dev\n"), "exit %d:\n%s", code, out);
}

TEST(deps_probe_finds_the_installed_packages) {
    char out[8192];
    int code = run(out, sizeof(out), MAKE_CHECK_DEPS);
    EXPECT(code == 0 && strstr(out, "found build-essential " BUILD_PACKAGES " openmpi-bin\n"), "exit %d:\n%s", code, out);
}

TEST(deps_non_root_user_gets_the_apt_line_and_no_install) {
    char out[8192];
    if (geteuid() != 0) SKIP("runs as root only (it drops to nobody); as non-root the first deps test covers it");
    if (run(out, sizeof(out), "command -v setpriv") != 0) SKIP("needs setpriv (util-linux) to drop to nobody");
    /* nobody may not be able to read the checkout (a clone in mktemp -d's 0700 folder): the probe
     * runs from a readable copy of what check-deps needs */
    char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/vitc_deps_nobody_%d", (int)getpid());
    int code = run(out, sizeof(out), "mkdir -p %s/tools && cp Makefile %s && cp tools/deps.sh %s/tools && chmod -R a+rX %s",
                   dir, dir, dir, dir);
    EXPECT(code == 0, "%s", out);
    code = run(out, sizeof(out), "cd %s && setpriv --reuid=65534 --regid=65534 --clear-groups " MAKE_CHECK_DEPS
               " CC='gcc -nostdinc'", dir);
    char cleanup[128];
    run(cleanup, sizeof(cleanup), "rm -rf %s", dir);
    EXPECT(code != 0 && strstr(out, "run as root: apt-get install -y " BUILD_PACKAGES "\n") &&
               !strstr(out, "update -qq"), "exit %d:\n%s", code, out);
}
