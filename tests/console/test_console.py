"""The console at /ui in headless Chromium against the real binary: log in
(admin and read-only), every page's content, the group page following a
member that joins, keyboard navigation, labels, the error banner, no
console errors, and each page's layout against its baseline (layout.py).

Run by tests/console/test.sh (``--update-baselines`` rewrites the layout
baselines); ASSIGND_BIN names the binary (default target/debug/assignd).
"""

import os
import sys
import unittest

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

import layout
from host import ROOT, Host

UPDATE_BASELINES = "--update-baselines" in sys.argv
if UPDATE_BASELINES:
    sys.argv.remove("--update-baselines")

SCREENSHOTS = ROOT / "target" / "console-screenshots"
WAIT_S = 20
#: How many Tab presses may reach an element before the test gives up.
TABS_MAX = 40

HEADER = {"header": "#header", "nav": "#nav", "title": "main h1"}
REGIONS = {
    "groups": {**HEADER, "filter": ".filter", "table": "#groups-table"},
    "group": {**HEADER, "overview": "#overview", "members": "#members-table",
              "grid": "#assignment-grid", "bindings": "#bindings-table",
              "timeline": "#timeline"},
    "modules": {**HEADER, "table": "#modules-table", "note": ".note"},
    "cluster": {**HEADER, "summary": "#cluster-summary", "nodes": "#nodes-table",
                "shards": "#shards-table"},
}


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=%d,%d" % layout.WINDOW,
                     "--force-device-scale-factor=1", "--hide-scrollbars"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    # The viewport itself at the layout's size, whatever the window's frame.
    width, height = layout.WINDOW
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    return driver


class ConsoleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        binary = os.environ.get("ASSIGND_BIN", str(ROOT / "target" / "debug" / "assignd"))
        cls.host = Host(binary)
        try:
            cls.host.create_group("orders-app", 8)
            cls.host.create_group("billing", 4)
            for group in ("orders-app", "billing"):
                cls.host.start_member(group, f"{group}-worker-a")
                cls.host.start_member(group, f"{group}-worker-b")
                cls.host.wait_stable(group, 2)
            cls.driver = browser()
        except BaseException:
            cls.host.stop()
            raise
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.host.stop()

    def setUp(self):
        # Errors the test provokes on purpose (a refused login) are allowed.
        self.expected_errors = []
        self.driver.get(self.host.url + "/ui")
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.refresh()
        self.driver.get_log("browser")

    def tearDown(self):
        severe = [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]
        unexpected = [m for m in severe if not any(x in m for x in self.expected_errors)]
        self.assertEqual(unexpected, [], "errors in the browser's console")

    # Helpers.

    def wait(self, condition, what):
        return WebDriverWait(self.driver, WAIT_S).until(lambda d: condition(d), what)

    def find(self, selector):
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def finds(self, selector):
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def text(self, selector):
        return self.find(selector).text

    def login(self, token):
        self.wait(lambda d: d.find_elements(By.ID, "token"), "the login form")
        field = self.find("#token")
        field.clear()
        field.send_keys(token, Keys.ENTER)

    def login_admin(self):
        self.login(self.host.admin_token)
        self.wait(lambda d: self.finds("#groups-table tbody a"), "the groups table")

    def open(self, hash_, ready_selector):
        self.driver.execute_script("location.hash = arguments[0]", hash_)
        self.wait(lambda d: self.finds(ready_selector), ready_selector)
        self.wait(lambda d: self.text("#live-text") == "live", "the live indicator")

    def column(self, table, index):
        return [cell.text for cell in self.finds(f"{table} tbody tr > :nth-child({index})")]

    def check_layout(self, page):
        self.driver.execute_script("scrollTo(0, 0)")
        self.driver.save_screenshot(str(SCREENSHOTS / f"{page}.png"))
        measured = layout.measure(self.driver, REGIONS[page])
        self.assertEqual(layout.problems(page, measured, UPDATE_BASELINES), [], page)

    # The pages.

    def test_groups_page_lists_filters_and_sorts(self):
        self.login_admin()
        self.assertEqual(self.text("#mode"), "admin")
        self.assertIn(self.host.url, self.text("#host-url"))
        self.wait(lambda d: self.text("#live-text") == "live", "live")
        self.assertEqual(self.column("#groups-table", 1), ["billing", "orders-app"])
        members = [str(len(self.host.call("GET", f"/v1/groups/{g}")["members"])) for g in ("billing", "orders-app")]
        self.wait(lambda d: self.column("#groups-table", 3) == members, "the member counts")
        self.assertEqual(self.column("#groups-table", 5), ["sticky", "sticky"])
        self.check_layout("groups")
        # Sorting: by members, then the other way by name.
        header = self.find("#groups-table thead th:nth-child(1)")
        self.assertEqual(header.get_attribute("aria-sort"), "ascending")
        header.find_element(By.TAG_NAME, "button").click()
        self.wait(lambda d: self.find("#groups-table thead th:nth-child(1)").get_attribute("aria-sort") == "descending", "sorted")
        self.assertEqual(self.column("#groups-table", 1), ["orders-app", "billing"])
        # The filter.
        self.find("#group-filter").send_keys("bill")
        self.wait(lambda d: self.column("#groups-table", 1) == ["billing"], "the filter")
        self.assertEqual(self.text("#group-count"), "1 of 2 groups")

    def test_group_page_shows_members_assignment_and_follows_a_join(self):
        self.login_admin()
        self.open("#/groups/orders-app", "#assignment-grid tbody tr")
        self.wait(lambda d: len(self.finds("#assignment-grid tbody tr")) == len(self.host.call("GET", "/v1/groups/orders-app")["members"]), "every member in the grid")
        self.assertIn("orders-app-worker-a", self.column("#members-table", 1))
        self.assertIn("http://orders-app-worker-a.example:8080", self.column("#members-table", 4))
        # Every member answered here holds a lease, shown counting down.
        self.assertTrue(all(c.endswith(" ms") for c in self.column("#members-table", 5)))
        active = self.finds("#assignment-grid td[data-kind='active']")
        self.assertEqual(len(active), 8, "each task active on one member")
        self.assertEqual(len(self.finds("#assignment-grid thead th.grid-task")), 8)
        for cell in self.finds("#assignment-grid td"):
            self.assertTrue(cell.get_attribute("aria-label"), "a cell says what it is")
        self.assertIn("sticky", self.text("#bindings-table"))
        self.assertIn("epoch", self.text("#timeline"))
        self.assertTrue(self.finds("[data-action='drain']"), "the admin may drain")
        # A member joins: the page shows it, holding tasks, without a reload.
        self.host.start_member("orders-app", "orders-app-worker-c")

        def joined_with_tasks(_):
            for row in self.finds("#assignment-grid tbody tr"):
                if row.find_element(By.TAG_NAME, "th").text == "orders-app-worker-c":
                    return row.find_elements(By.CSS_SELECTOR, "td[data-kind='active']")
            return False
        self.wait(joined_with_tasks, "the new member with active tasks in the grid")
        self.assertIn("orders-app-worker-c", self.column("#members-table", 1))

    def test_group_page_layout(self):
        self.login_admin()
        self.open("#/groups/billing", "#assignment-grid tbody tr")
        self.check_layout("group")

    def test_modules_page(self):
        self.login_admin()
        self.open("#/modules", "#modules-table tbody tr")
        names = self.column("#modules-table", 1)
        for builtin in ("range", "round-robin", "sticky", "learner-aware"):
            self.assertIn(builtin, names)
        row = self.finds("#modules-table tbody tr")[names.index("sticky")]
        self.assertIn("orders-app", row.text)
        self.assertIn("billing", row.text)
        self.check_layout("modules")

    def test_cluster_page(self):
        self.login_admin()
        self.open("#/cluster", "#shards-table tbody tr")
        self.assertEqual(len(self.finds("#nodes-table tbody tr")), 1)
        self.assertIn("8", self.column("#nodes-table", 3))
        self.assertIn("One host serving 8 of 8 shards", self.text("#cluster-summary"))
        groups = sum(int(n) for n in self.column("#shards-table", 3))
        self.assertEqual(groups, 2)
        self.check_layout("cluster")

    # Access.

    def test_read_only_login_sees_no_actions(self):
        self.login(self.host.read_only_token)
        self.wait(lambda d: self.finds("#groups-table tbody a"), "the groups table")
        self.assertEqual(self.text("#mode"), "read-only")
        self.open("#/groups/orders-app", "#members-table tbody tr")
        self.assertEqual(self.finds("[data-action]"), [], "no drain, no rollback")
        self.assertEqual(self.host.status("POST", "/v1/groups/orders-app/members/x/drain", self.host.read_only_token), (403, "read_only_token"))
        self.find("#logout").click()
        self.wait(lambda d: self.finds("#token"), "the login form again")
        self.assertTrue(self.find("#nav").get_attribute("hidden") is not None)

    def test_a_refused_login_and_a_failing_read_show_the_banner(self):
        self.expected_errors = ["status of 403", "status of 404"]
        self.login("not-the-token-0123456789")
        self.wait(lambda d: self.find("#banner").is_displayed(), "the banner")
        self.assertIn("not the admin token", self.text("#banner"))
        self.assertEqual(self.find("#banner").get_attribute("role"), "alert")
        self.login_admin()
        self.driver.execute_script("location.hash = '#/groups/no-such-group'")
        self.wait(lambda d: self.find("#banner").is_displayed(), "the banner")
        self.assertIn("no-such-group", self.text("#banner"))
        self.assertEqual(self.text("#live-text"), "offline")

    # Accessibility.

    def tab_until(self, matches, what):
        actions = webdriver.ActionChains(self.driver)
        for _ in range(TABS_MAX):
            actions.send_keys(Keys.TAB).perform()
            focused = self.driver.switch_to.active_element
            if matches(focused):
                return focused
        self.fail(f"Tab never reached {what}")

    def test_keyboard_reaches_the_filter_and_opens_a_group(self):
        self.login_admin()
        # From the top of the page: the body focused, nothing in it.
        self.driver.execute_script("document.body.tabIndex = -1; document.body.focus()")
        focused = self.tab_until(lambda e: e.get_attribute("id") == "group-filter", "the filter")
        outline = self.driver.execute_script("return getComputedStyle(arguments[0]).outlineStyle", focused)
        self.assertNotEqual(outline, "none", "the focus is visible")
        link = self.tab_until(lambda e: (e.get_attribute("href") or "").endswith("#/groups/billing"), "a group's link")
        self.assertEqual(link.text, "billing")
        webdriver.ActionChains(self.driver).send_keys(Keys.ENTER).perform()
        self.wait(lambda d: d.execute_script("return location.hash") == "#/groups/billing", "the group page")
        self.wait(lambda d: self.finds("#members-table"), "the group page")
        self.assertEqual(self.text("main h1"), "Group billing")

    def test_group_page_shows_its_shadows_comparisons(self):
        self.host.call("PUT", "/v1/groups/billing/shadow", {"assignor": "round-robin"})
        try:
            # A new binding asks the live assignor, and the shadow beside it.
            self.host.call("PUT", "/v1/groups/billing/assignor",
                           {"module": "sticky", "limits": {"fuel_max": 10_000_000_000}})
            self.login_admin()
            self.open("#/groups/billing", "#shadow-table tbody tr")
            row = self.text("#shadow-table tbody tr")
            for part in ("sticky:", "round-robin:", "moved", "learners started", "fuel"):
                self.assertIn(part, row)
        finally:
            self.host.call("DELETE", "/v1/groups/billing/shadow")
            self.host.call("PUT", "/v1/groups/billing/assignor", {"module": "sticky"})

    def test_rollouts_pages_follow_a_rollout(self):
        self.login_admin()
        self.open("#/rollouts", "#rollouts-table")
        status = self.host.call("POST", "/v1/rollouts", {
            "id": "console-range", "module": "range", "groups": "list:billing",
            "steps": "100%", "every": "1s", "shadow_for": "1s",
        })
        self.assertEqual(status["id"], "console-range")
        self.wait(lambda d: "console-range" in self.column("#rollouts-table", 1), "the rollout listed")
        self.find("#rollouts-table tbody a").click()
        self.wait(lambda d: self.finds("#rollout-events li"), "the rollout's decisions")
        self.assertIn("started", self.text("#rollout-events"))
        # It runs to its end on its own: the page follows it.
        self.wait(lambda d: "completed" in self.text("main dl"), "the rollout completed")
        self.assertEqual(self.host.call("GET", "/v1/groups/billing")["config"]["assignor"], "range")
        self.assertTrue(self.finds("label[for='rollout-reason']"))

    def test_every_input_has_a_label_and_every_header_cell_a_scope(self):
        self.assertTrue(self.finds("label[for='token']"), "the token's label")
        self.login_admin()
        for hash_, ready in (("#/groups", "#groups-table tbody tr"), ("#/groups/billing", "#assignment-grid tbody tr"),
                             ("#/modules", "#modules-table tbody tr"), ("#/rollouts", "#rollouts-table"),
                             ("#/cluster", "#shards-table tbody tr")):
            self.open(hash_, ready)
            unlabelled = self.driver.execute_script("""
                return [...document.querySelectorAll('input, select, textarea')]
                  .filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.outerHTML);""")
            self.assertEqual(unlabelled, [], hash_)
            unscoped = self.driver.execute_script("""
                return [...document.querySelectorAll('th')].filter(e => !e.getAttribute('scope')).map(e => e.outerHTML);""")
            self.assertEqual(unscoped, [], hash_)
            nameless = self.driver.execute_script("""
                return [...document.querySelectorAll('button, a')]
                  .filter(e => !e.textContent.trim() && !e.getAttribute('aria-label')).map(e => e.outerHTML);""")
            self.assertEqual(nameless, [], hash_)
            self.assertTrue(self.finds("nav a[aria-current='page']"), hash_)


if __name__ == "__main__":
    unittest.main(verbosity=2)
