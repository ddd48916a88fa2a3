// One sentence per rule id of docs/rules.md: the terminal client's glossary itself
// (libs/client/masa_client/rulebook.json), bundled. The server's error names the rule and what
// went wrong in this case, and this adds what the rule is about, for players who do not know
// the book.
import glossary from "../../../libs/client/masa_client/rulebook.json";


const RULES: Readonly<Record<string, string>> = glossary;

/** What `rule` is about, or "" for an id the glossary does not know. */
export function meaning(rule: string): string {
  return RULES[rule] ?? "";
}

/** Whether an error reason is a rule id of the book ("E-8", "F-33r") rather than a platform
 * reason ("SEQUENCE_MISMATCH"). */
export function isRuleId(reason: string): boolean {
  return /^[CEFP]-\d+[a-z]?$/.test(reason);
}
